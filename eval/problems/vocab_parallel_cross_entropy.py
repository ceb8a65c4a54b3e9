"""Vocabulary-parallel cross-entropy loss (forward).

The logits of T tokens are split over the ranks by vocabulary: rank r holds `logits`
(T x V/W bf16), columns [r*V/W, (r+1)*V/W) of the full T x V logits. Every rank holds the
same `target` (T int64, in [0, V)). Every rank returns the per-token loss (T float32):

    loss[t] = logsumexp_v(logits[t, v]) - logits[t, target[t]]     over the FULL vocabulary,

computed in float32. Megatron subtracts a global max (all-reduce MAX), all-reduces the
target logit (only its owner contributes) and the sum of exponentials: three T-element
all-reduces around one pass over the logits. The full logits never exist on one rank.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="vocab_parallel_cross_entropy",
    name="Vocab-parallel cross-entropy (forward)",
    category="vocab",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/tensor_parallel/cross_entropy.py",
    source_function="VocabParallelCrossEntropy.forward (_VocabParallelCrossEntropy)",
    world_sizes=(2, 4, 8),
    dtype="float32",
    tags=("reduction", "latency"),
)

T, V = 16384, 131072


def dims(world_size, size):
    return scaled(T, size**0.5, 16), scaled(V, size**0.5, 64 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, v = dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    logits = randn((t, v // world_size), g, torch.bfloat16, device, scale=2.0)
    gt = generator(seed * 1000 + 999, device)
    target = torch.randint(0, v, (t,), generator=gt, device=device)
    return logits, target


def target_logit_and_stats(logits, target, group=None):
    """Float32 (global max, target logit, sum of exp(logit - max)) per token, all-reduced."""
    rank = dist.get_rank(group=group)
    vl = logits.shape[1]
    x = logits.float()
    mx = x.amax(dim=-1)
    dist.all_reduce(mx, op=dist.ReduceOp.MAX, group=group)
    x = x - mx[:, None]
    local = target - rank * vl
    inside = (local >= 0) & (local < vl)
    picked = x.gather(1, local.clamp(0, vl - 1)[:, None]).squeeze(1) * inside
    sums = torch.stack([picked, x.exp().sum(dim=-1)])
    dist.all_reduce(sums, group=group)
    return mx, x, sums[0], sums[1]


def reference(logits, target):
    _, _, picked, sum_exp = target_logit_and_stats(logits, target)
    return sum_exp.log() - picked


def roofline(world_size, size=1.0):
    # link: each rank must learn the other ranks' combined log-sum-exp of every token (one
    #       float32 per token) and, for the (W-1)/W of targets it does not own, the target
    #       logit (one more float32): T 4 (1 + (W-1)/W) B received.
    # HBM:  read the T x V/W bf16 logits once, the targets (int64), write the fp32 loss.
    # FLOPs: about 3 per logit (subtract, exp, add).
    t, v = dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=t * 4 * (1 + (w - 1) / w),
        hbm_bytes=t * v // w * 2 + t * 8 + t * 4,
        flops=3 * t * v / w,
    )
