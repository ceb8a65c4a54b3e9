"""Vocabulary-parallel token log-probabilities and entropy for RL post-training, on a TP x DP grid.

The ranks form tensor-parallel groups of 2 consecutive ranks and data-parallel groups across
them (eval.problem.tp_dp_groups(2)); each TP group works on its own sequences. Every rank
holds its vocabulary shard of the policy's logits `logits` (T x V/2 bf16, columns
[t*V/2, (t+1)*V/2) for its TP rank t) and the sampled tokens `labels` (T int64, the same on
both ranks of a TP group). Every rank returns (log_probs, entropy), float32 of shape T:

    log_probs[i] = logits[i, labels[i]] - logsumexp(logits[i, :])
    entropy[i]   = logsumexp(logits[i, :]) - sum_v softmax(logits[i, :])[v] * logits[i, v]

over the full vocabulary of the TP group, in float32. As verl's
vocab_parallel_log_probs_from_logits / vocab_parallel_entropy on Megatron's tensor-parallel
group: the statistics are all-reduced within the TP group only.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled, tp_dp_groups
from eval.problems.vocab_parallel_cross_entropy import target_logit_and_stats

META = Meta(
    id="vocab_parallel_logprobs",
    name="Vocab-parallel log-probs and entropy (RL post-training, TP x DP)",
    category="vocab",
    source_repo="volcengine/verl",
    source_file="verl/utils/megatron/tensor_parallel.py",
    source_function="vocab_parallel_log_probs_from_logits / vocab_parallel_entropy",
    world_sizes=(2, 4, 8),
    dtype="float32",
    atol=1e-3,
    rtol=1e-4,
    tags=("sub_groups", "reduction", "rl"),
)

TP = 2
T, V = 8192, 152064  # Qwen2.5 padded vocabulary


def dims(size):
    return scaled(T, size**0.5, 16), scaled(V, size**0.5, 64 * TP)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    tp_dp_groups(TP)  # created once, in the same order on every rank
    t, v = dims(size)
    g = generator(seed * 1000 + rank, device)
    logits = randn((t, v // TP), g, torch.bfloat16, device, scale=3.0)
    gl = generator(seed * 1000 + 800 + rank // TP, device)  # shared within the TP group
    labels = torch.randint(0, v, (t,), generator=gl, device=device)
    return logits, labels


def reference(logits, labels):
    tp_group, _ = tp_dp_groups(TP)
    mx, shifted, picked, sum_exp = target_logit_and_stats(logits, labels, group=tp_group)
    p_z = (shifted.exp() * shifted).sum(dim=-1)  # sum of exp(z - max) * (z - max), local
    dist.all_reduce(p_z, group=tp_group)
    lse = sum_exp.log()  # of the shifted logits
    return picked - lse, lse - p_z / sum_exp


def roofline(world_size, size=1.0):
    # link: within its TP group a rank must receive, per token, the partner's contribution to
    #       the log-sum-exp and to sum p z (two float32) and, for the half of labels it does
    #       not own, the label logit: T 4 (2 + (TP-1)/TP) B.
    # HBM:  read the T x V/2 bf16 shard once; write two T float32 vectors; read labels.
    # FLOPs: about 5 per logit.
    t, v = dims(size)
    return Roofline(
        link_bytes=t * 4 * (2 + (TP - 1) / TP),
        hbm_bytes=t * v // TP * 2 + t * 8 + 2 * t * 4,
        flops=5 * t * v / TP,
    )
