"""MoE combine: all-to-all the expert outputs back to their tokens and sum them with the router
weights.

The inverse of moe_dispatch (same expert placement and row layout). Every rank holds
`expert_out` (N x H bf16): the outputs of its local experts, one row per (token, expert)
pair it received, ordered by local expert, then source rank, then token index at the source;
`recv_counts` (W x E/W int64): how many rows of each local expert came from each source rank
(known from the dispatch); and, for its own tokens, `topk_idx` (T x k int64) and
`topk_weights` (T x k float32). Every rank returns out (T x H bf16):

    out[t] = sum over j < k of topk_weights[t, j] * (the row of token t for expert topk_idx[t, j]),

accumulated in float32. Megatron re-sorts the rows by source, runs the reverse uneven
all-to-all and scatter-adds the weighted rows (unpermute); DeepEP's combine reduces the
copies of a token on the expert side of the link before sending.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn
from eval.problems._moe import chunks_transpose, recv_counts, routing
from eval.problems.moe_dispatch import dims

META = Meta(
    id="moe_combine",
    name="MoE combine: uneven all-to-all back and weighted sum",
    category="expert",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/transformer/moe/token_dispatcher.py",
    source_function="MoEAlltoAllTokenDispatcher.token_combine (sort_chunks_by_idxs, all_to_all, unpermute)",
    world_sizes=(2, 4, 8),
    tags=("all_to_all", "variable_size"),
)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h, e, k = dims(world_size, size)
    counts = recv_counts(rank, world_size, seed, device, t, e, k)
    g = generator(seed * 1000 + rank, device)
    expert_out = randn((int(counts.sum()), h), g, torch.bfloat16, device)
    idx, weights = routing(rank, world_size, seed, device, t, e, k)
    return expert_out, counts, idx, weights


def reference(expert_out, recv_counts, topk_idx, topk_weights):
    w = dist.get_world_size()
    el = recv_counts.shape[1]
    by_source = chunks_transpose(expert_out, recv_counts.t())  # expert-major -> source-major
    flat = topk_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)  # this rank's pairs as dispatch sent them
    per_expert = torch.bincount(flat, minlength=el * w)
    back = expert_out.new_empty((int(per_expert.sum()), expert_out.shape[1]))
    dist.all_to_all_single(back, by_source, per_expert.view(w, el).sum(1).tolist(), recv_counts.sum(1).tolist())
    # back: this rank's (token, expert) pairs sorted by expert, token order within an expert
    k = topk_idx.shape[1]
    token_of = torch.arange(topk_idx.shape[0], device=back.device).repeat_interleave(k)[order]
    weight_of = topk_weights.reshape(-1)[order]
    out = torch.zeros((topk_idx.shape[0], back.shape[1]), dtype=torch.float32, device=back.device)
    out.index_add_(0, token_of, back.float() * weight_of[:, None])
    return out.to(torch.bfloat16)


def roofline(world_size, size=1.0):
    # link: every token with an expert on another rank needs at least one H-row back (the
    #       expert side can pre-reduce a token's copies): (W-1)/W T H 2 B in expectation, as in
    #       moe_dispatch.
    # HBM:  read the T k expert rows (expected), write T x H.
    # FLOPs: a multiply-add per element of each expert row, 2 T k H.
    t, h, e, k = dims(world_size, size)
    w = world_size
    return Roofline(link_bytes=(w - 1) / w * t * h * 2, hbm_bytes=t * k * h * 2 + t * h * 2, flops=2 * t * k * h)
