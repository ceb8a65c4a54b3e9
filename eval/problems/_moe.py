"""Shared pieces of the expert-parallel problems: deterministic routing and the token dispatch.

Experts are placed in contiguous blocks: rank r owns experts [r*E/W, (r+1)*E/W). The router
of every source rank is reproducible from (seed, source rank), so make_inputs of one rank can
know how many tokens every other rank sends it (as the real dispatch learns from a count
exchange).
"""

import torch
import torch.distributed as dist

from eval.problem import generator, randn


def routing(src_rank, world_size, seed, device, t, e, k):
    """Top-k expert ids (t, k) int64 and their softmax weights (t, k) float32 for the tokens of
    `src_rank`. Expert popularity varies (so counts per expert vary) with the same popularity
    pattern inside every rank's block, so no rank is favoured in expectation."""
    g = generator(seed * 1000 + 700 + src_rank, device)
    gp = generator(seed * 1000 + 699, device)
    local_bias = randn((e // world_size,), gp, torch.float32, device, scale=0.7)
    logits = randn((t, e), g, torch.float32, device) + local_bias.repeat(world_size)
    top, idx = logits.topk(k, dim=-1)
    return idx, torch.softmax(top, dim=-1)


def recv_counts(rank, world_size, seed, device, t, e, k):
    """(W, E/W) int64: how many (token, expert) pairs each source rank sends to each of
    `rank`'s local experts."""
    el = e // world_size
    rows = []
    for src in range(world_size):
        idx, _ = routing(src, world_size, seed, device, t, e, k)
        rows.append(torch.bincount(idx.reshape(-1), minlength=e)[rank * el : (rank + 1) * el])
    return torch.stack(rows)


def permute(tokens, topk_idx, num_experts):
    """Copies of the token rows sorted by expert (stable: token order within an expert), the
    token index of each copy, and the number of copies per expert (E,)."""
    k = topk_idx.shape[1]
    flat = topk_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token_of = torch.arange(tokens.shape[0], device=tokens.device).repeat_interleave(k)[order]
    return tokens[token_of], order, torch.bincount(flat, minlength=num_experts)


def chunks_transpose(x, counts):
    """Rows of x in chunks counts[i, j] laid out i-major; return them j-major."""
    pieces = list(torch.split(x, counts.reshape(-1).tolist()))
    a, b = counts.shape
    return torch.cat([pieces[i * b + j] for j in range(b) for i in range(a)])


def dispatch(tokens, topk_idx, num_experts):
    """All-to-all token dispatch: returns (rows for my local experts, ordered by local expert,
    then source rank, then source token order; tokens per local expert (E/W,);
    the (W, E/W) receive counts)."""
    w = dist.get_world_size()
    el = num_experts // w
    permuted, _, per_expert = permute(tokens, topk_idx, num_experts)
    counts = torch.empty_like(per_expert)
    dist.all_to_all_single(counts, per_expert)  # counts[j*el + e]: from rank j to my expert e
    counts = counts.view(w, el)
    recv = permuted.new_empty((int(counts.sum()), tokens.shape[1]))
    dist.all_to_all_single(recv, permuted, counts.sum(1).tolist(), per_expert.view(w, el).sum(1).tolist())
    return chunks_transpose(recv, counts), counts.sum(0), counts
