"""FSDP forward of a linear layer: all-gather the dim-0-sharded weight, then GEMM on the local batch.

Every rank holds its own micro-batch of activations `x` (M x K bf16) and its FSDP shard of
the weight `weight_shard` (N/W x K bf16): rows [r*N/W, (r+1)*N/W) of the nn.Linear weight
(FSDP2 shards parameters on dim 0). Every rank returns y = x @ W.T (M x N bf16), W the full
weight gathered from all ranks in rank order.

FSDP2 issues the all-gather ahead of the layer's compute; a fused kernel multiplies by each
weight shard as soon as it arrives (and never needs to materialise the gathered weight).
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="fsdp_allgather_gemm",
    name="FSDP parameter all-gather + GEMM",
    category="fsdp",
    source_repo="pytorch/pytorch",
    source_file="torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py",
    source_function="foreach_all_gather (then the module's F.linear)",
    world_sizes=(2, 4, 8),
    tags=("all_gather", "gemm", "overlap"),
)

M, K, N = 8192, 8192, 16384


def _dims(world_size, size):
    f = size ** (1 / 3)
    return scaled(M, f, 64), scaled(K, f, 64), scaled(N, f, 64 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    m, k, n = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    x = randn((m, k), g, torch.bfloat16, device)
    weight_shard = randn((n // world_size, k), g, torch.bfloat16, device, scale=k**-0.5)
    return x, weight_shard


def reference(x, weight_shard):
    w = dist.get_world_size()
    full = torch.empty((weight_shard.shape[0] * w, weight_shard.shape[1]), dtype=weight_shard.dtype, device=x.device)
    dist.all_gather_into_tensor(full, weight_shard)
    return x @ full.t()


def roofline(world_size, size=1.0):
    # link: the (W-1)/W of the weight held by other ranks must arrive (bf16).
    # HBM:  read x and the local shard, write y (remote shards can stream into the GEMM).
    # FLOPs: 2 M N K, all local.
    m, k, n = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * n * k * 2,
        hbm_bytes=(m * k + n // w * k + m * n) * 2,
        flops=2 * m * n * k,
    )
