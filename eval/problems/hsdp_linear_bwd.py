"""HSDP backward of a linear layer: all-gather the weight in the shard group, two GEMMs, then
reduce-scatter the weight gradient in the shard group and all-reduce it across replicas.

Hybrid sharding: the ranks form shard groups of S consecutive ranks (S = W/2 for W >= 4,
S = W for W = 2) and replicate groups across them (eval.problem.tp_dp_groups(S)). Every rank
holds its micro-batch's input `x` (M x K bf16) and output gradient `grad_y` (M x N bf16),
and its shard of the weight `weight_shard` (N/S x K bf16, rows [s*N/S, (s+1)*N/S) for its
index s in the shard group). Every rank returns (grad_x, grad_weight_shard):

- grad_x = grad_y @ W (M x K bf16), W the weight gathered over the shard group;
- grad_weight_shard (N/S x K float32): rows of sum over ALL W ranks of (grad_y.T @ x, as
  bf16) / W, for this rank's weight rows: a float32 reduce-scatter in the shard group, then
  an all-reduce across the replicas, averaged over the world (FSDP2 with reduce_dtype fp32).
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled, tp_dp_groups

META = Meta(
    id="hsdp_linear_bwd",
    name="HSDP linear backward: weight all-gather, dgrad/wgrad, RS + replica all-reduce",
    category="fsdp",
    source_repo="pytorch/pytorch",
    source_file="torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py",
    source_function="foreach_reduce (reduce_scatter in the shard group, all_reduce in the replicate group)",
    world_sizes=(2, 4, 8),
    atol=1e-2,
    rtol=1e-2,  # grad_weight is a sum of bf16 partial products: fp32 ordering differs
    tags=("sub_groups", "backward", "gemm", "reduce_scatter"),
)

M, K, N = 8192, 8192, 8192


def shard_size(world_size):
    return world_size // 2 if world_size >= 4 else world_size


def _dims(world_size, size):
    f = size ** (1 / 3)
    return scaled(M, f, 64), scaled(K, f, 64), scaled(N, f, 64 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    s = shard_size(world_size)
    tp_dp_groups(s)  # created once, in the same order on every rank
    m, k, n = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    x = randn((m, k), g, torch.bfloat16, device)
    grad_y = randn((m, n), g, torch.bfloat16, device)
    gw = generator(seed * 1000 + 500 + rank % s, device)  # replicas hold the same shard
    weight_shard = randn((n // s, k), gw, torch.bfloat16, device, scale=k**-0.5)
    return x, grad_y, weight_shard


def reference(x, grad_y, weight_shard):
    w = dist.get_world_size()
    s = shard_size(w)
    shard_group, replicate_group = tp_dp_groups(s)
    full = torch.empty((weight_shard.shape[0] * s, weight_shard.shape[1]), dtype=weight_shard.dtype, device=x.device)
    dist.all_gather_into_tensor(full, weight_shard, group=shard_group)
    grad_x = grad_y @ full
    grad_w = (grad_y.t() @ x).float().div_(w)  # bf16 GEMM, reduced in float32
    mine = torch.empty(weight_shard.shape, dtype=torch.float32, device=x.device)
    dist.reduce_scatter_tensor(mine, grad_w, group=shard_group)
    if w // s > 1:
        dist.all_reduce(mine, group=replicate_group)
    return grad_x, mine


def roofline(world_size, size=1.0):
    # link: into a rank, the (S-1)/S of the weight it lacks (bf16); out of it, its partial
    #       weight gradients for the (S-1)/S of rows it does not own (bf16 products, exact in
    #       2 B). The two directions overlap: (S-1)/S N K 2 B. (The replica all-reduce adds
    #       more; left out, so this stays a lower bound.)
    # HBM:  read x, grad_y and the weight shard; write grad_x and the fp32 gradient shard.
    # FLOPs: two GEMMs of 2 M N K.
    m, k, n = _dims(world_size, size)
    s = shard_size(world_size)
    return Roofline(
        link_bytes=(s - 1) / s * n * k * 2,
        hbm_bytes=(m * k + m * n + n // s * k + m * k) * 2 + n // s * k * 4,
        flops=4 * m * n * k,
    )
