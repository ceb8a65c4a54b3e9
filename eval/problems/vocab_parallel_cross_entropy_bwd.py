"""Vocabulary-parallel cross-entropy backward: the gradient of the loss with respect to the logit shard.

Inputs as in vocab_parallel_cross_entropy (`logits` T x V/W bf16, this rank's vocabulary
columns; `target` T int64, the same on every rank) plus `grad_loss` (T float32, dL/dloss of
every token, the same on every rank). Every rank returns its shard of

    grad_logits[t, v] = grad_loss[t] * (softmax(logits[t, :])[v] - [v == target[t]])

(T x V/W bf16), the softmax over the FULL vocabulary in float32. Megatron keeps the softmax
from the forward pass; here the statistics (global max and sum of exponentials) must be
recomputed, so the pass is: local reductions, one small all-reduce, one elementwise pass.
"""

import torch

from eval.problem import Meta, Roofline, generator, randn
from eval.problems.vocab_parallel_cross_entropy import dims, target_logit_and_stats
from eval.problems.vocab_parallel_cross_entropy import make_inputs as _ce_inputs

META = Meta(
    id="vocab_parallel_cross_entropy_bwd",
    name="Vocab-parallel cross-entropy backward (softmax minus one-hot)",
    category="vocab",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/tensor_parallel/cross_entropy.py",
    source_function="VocabParallelCrossEntropy.calculate_gradients (_VocabParallelCrossEntropy.backward)",
    world_sizes=(2, 4, 8),
    tags=("backward", "reduction"),
)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    logits, target = _ce_inputs(rank, world_size, seed, device, size)
    g = generator(seed * 1000 + 998, device)  # the same on every rank
    grad_loss = randn((logits.shape[0],), g, torch.float32, device).abs_().add_(0.1)
    return logits, target, grad_loss


def reference(logits, target, grad_loss):
    import torch.distributed as dist

    _, shifted, _, sum_exp = target_logit_and_stats(logits, target)
    grad = shifted.exp() / sum_exp[:, None]
    vl = logits.shape[1]
    local = target - dist.get_rank() * vl
    rows = torch.nonzero((local >= 0) & (local < vl)).squeeze(1)
    grad[rows, local[rows]] -= 1.0
    return (grad * grad_loss[:, None]).to(torch.bfloat16)


def roofline(world_size, size=1.0):
    # link: each rank must learn the other ranks' combined log-sum-exp of every token: one
    #       float32 per token (the one-hot part is local).
    # HBM:  read the bf16 logit shard, write the bf16 gradient shard (plus small vectors).
    # FLOPs: about 5 per logit (max, exp, sum, scale, subtract).
    t, v = dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=t * 4,
        hbm_bytes=2 * t * v // w * 2 + t * 8 + t * 4,
        flops=5 * t * v / w,
    )
