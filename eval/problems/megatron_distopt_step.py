"""Megatron distributed-optimizer step on a TP x DP grid: reduce-scatter over DP, a global grad
norm for clipping, AdamW on the shard, all-gather over DP.

The ranks form tensor-parallel groups of 2 consecutive ranks and data-parallel groups across
them (eval.problem.tp_dp_groups(2); DP size W/2). Every rank holds its tensor-parallel shard
of the model as one flat bf16 gradient `grad` (N, from its own micro-batch) and the optimizer
state of its 1/DP part of that shard, elements [d*N/DP, (d+1)*N/DP) where d is its rank in
the DP group: `master`, `exp_avg`, `exp_avg_sq` (fp32, N/DP); `step` (int) and `max_norm`
(float). Every rank returns (params, master', exp_avg', exp_avg_sq'):

1. g = (sum over the DP group of grad, float32) / DP, on the owned part;
2. total_norm = sqrt(sum over ALL ranks of sum(g^2)) (every element of the model is owned
   exactly once across the grid); clip = max_norm / (total_norm + 1e-6); if clip < 1, g *= clip;
3. AdamW as in zero2_adamw_step (lr 1e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1);
4. params: bf16 of the updated master, all-gathered over the DP group (N elements).

The norm is a global synchronisation between the reduction and the update.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled, tp_dp_groups
from eval.problems.zero2_adamw_step import adamw, optimizer_state

META = Meta(
    id="megatron_distopt_step",
    name="Distributed-optimizer step with global grad-norm clipping (TP x DP)",
    category="fsdp",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/optimizer/distrib_optimizer.py",
    source_function="DistributedOptimizer.step (with clip_grad_norm over the grad-stats group)",
    world_sizes=(2, 4, 8),
    tags=("sub_groups", "optimizer", "reduce_scatter", "all_gather"),
)

TP = 2
N = 64 * 2**20


def _n(world_size, size):
    return scaled(N, size, 1024 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    tp_dp_groups(TP)  # created once, in the same order on every rank
    dp = world_size // TP
    n = _n(world_size, size)
    g = generator(seed * 1000 + rank, device)
    grad = randn((n,), g, torch.bfloat16, device, scale=1e-3)
    return (grad, *optimizer_state(rank, world_size, seed, device, n // dp), 10, 1.0)


def reference(grad, master, exp_avg, exp_avg_sq, step, max_norm):
    _, dp_group = tp_dp_groups(TP)
    dp = dist.get_world_size(group=dp_group)
    shard = torch.empty_like(master)
    dist.reduce_scatter_tensor(shard, grad.float(), group=dp_group)
    g = shard / dp
    sq = g.pow(2).sum()
    dist.all_reduce(sq)  # every element is owned by exactly one rank of the grid
    clip = max_norm / (sq.sqrt() + 1e-6)
    if clip < 1.0:
        g = g * clip
    p, m, v = adamw(master, exp_avg, exp_avg_sq, g, step)
    params = torch.empty(grad.shape, dtype=torch.bfloat16, device=grad.device)
    dist.all_gather_into_tensor(params, p.to(torch.bfloat16), group=dp_group)
    return params, p, m, v


def roofline(world_size, size=1.0):
    # link: as in zero2_adamw_step but within the DP group: out go the other DP ranks'
    #       gradient elements ((DP-1)/DP N 2 B) and this rank's updated parameters (N/DP 2 B),
    #       2N B in all when DP > 1 (nothing when DP = 1); plus the 4-byte norm all-reduce
    #       (2 (W-1)/W 4 B).
    # HBM:  read grad (N bf16); read and write three fp32 state shards of N/DP; write params.
    # FLOPs: about 17 per owned element (norm, clip, update) and the received adds.
    n = _n(world_size, size)
    dp = world_size // TP
    return Roofline(
        link_bytes=(2 * n if dp > 1 else 0) + 2 * (world_size - 1) / world_size * 4,
        hbm_bytes=n * 2 + 6 * n // dp * 4 + n * 2,
        flops=17 * n / dp + (dp - 1) / dp * n,
    )
