"""MoE token dispatch with all-to-all: variable token counts per expert.

E experts are spread over the ranks in contiguous blocks (rank r owns experts
[r*E/W, (r+1)*E/W)). Every rank holds its tokens `tokens` (T x H bf16), the router's choice
`topk_idx` (T x k int64, k distinct experts per token; expert popularity varies, so counts
differ per expert and per rank pair) and `num_experts` = E. Every rank returns
(recv, tokens_per_expert):

- recv (N x H bf16): one row per (token, expert) pair routed to this rank's experts, from
  every rank, ordered by local expert, then by source rank, then by token index at the
  source (the layout grouped GEMMs consume);
- tokens_per_expert (E/W int64): the number of rows per local expert.

Megatron's MoEAlltoAllTokenDispatcher permutes locally, exchanges counts, runs an uneven
all-to-all and re-sorts the received chunks by expert; DeepEP does it in one kernel and sends
each token once per destination rank even when it picks several experts there.
"""

import torch

from eval.problem import Meta, Roofline, generator, randn, scaled
from eval.problems._moe import dispatch, routing

META = Meta(
    id="moe_dispatch",
    name="MoE dispatch: uneven all-to-all of tokens to experts",
    category="expert",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/transformer/moe/token_dispatcher.py",
    source_function="MoEAlltoAllTokenDispatcher.token_dispatch (permute, all_to_all, sort_chunks_by_idxs)",
    world_sizes=(2, 4, 8),
    tags=("all_to_all", "variable_size"),
)

T, H, E, K = 8192, 2048, 128, 8  # Qwen3-30B-A3B-like: 128 experts, top-8


def dims(world_size, size):
    e = scaled(E, size**0.25, 2 * world_size)
    return scaled(T, size**0.5, 16), scaled(H, size**0.5, 16), e, min(K, e // 2)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h, e, k = dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    tokens = randn((t, h), g, torch.bfloat16, device)
    idx, _ = routing(rank, world_size, seed, device, t, e, k)
    return tokens, idx, e


def reference(tokens, topk_idx, num_experts):
    recv, per_expert, _ = dispatch(tokens, topk_idx, num_experts)
    return recv, per_expert


def roofline(world_size, size=1.0):
    # link: a token must leave its rank (once, even if it picks several experts there) unless
    #       all k of its experts are local; the first expert alone is remote with probability
    #       (W-1)/W (every rank's expert block has the same popularity pattern), so at least
    #       (W-1)/W T H 2 B leave in expectation. The receiving side is symmetric.
    # HBM:  read the tokens, write the T k received rows (T k per rank in expectation).
    # FLOPs: none.
    t, h, e, k = dims(world_size, size)
    w = world_size
    return Roofline(link_bytes=(w - 1) / w * t * h * 2, hbm_bytes=t * h * 2 + t * k * h * 2, flops=0)
