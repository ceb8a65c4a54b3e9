"""GEMM + reduce-scatter: the sequence-parallel row-parallel linear layer.

Every rank holds `a` (M x K/W, its shard of the activations' K dimension) and `b` (K/W x N, its
shard of the weight's rows). The full product is the sum over ranks of a @ b; rank r returns
rows [r*M/W, (r+1)*M/W) of it, shape (M/W, N). A fused kernel sends each finished tile of
partial sums to the rank that owns it while the GEMM goes on.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="gemm_rs",
    name="GEMM + reduce-scatter (row-parallel linear, sequence parallel)",
    category="tensor",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/tensor_parallel/layers.py",
    source_function="RowParallelLinear.forward (reduce_scatter_to_sequence_parallel_region)",
    world_sizes=(2, 4, 8),
    tags=("overlap", "gemm"),
)

M, K, N = 8192, 8192, 8192


def _dims(world_size, size):
    m = scaled(M, size ** (1 / 3), 128 * world_size)
    k = scaled(K, size ** (1 / 3), 128 * world_size)
    n = scaled(N, size ** (1 / 3), 128)
    return m, k, n


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    m, k, n = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    a = randn((m, k // world_size), g, torch.bfloat16, device)
    b = randn((k // world_size, n), g, torch.bfloat16, device, scale=k**-0.5)
    return a, b


def reference(a, b):
    partial = a @ b
    out = torch.empty((partial.shape[0] // dist.get_world_size(), partial.shape[1]), dtype=a.dtype, device=a.device)
    dist.reduce_scatter_tensor(out, partial)
    return out


def roofline(world_size, size=1.0):
    # Each rank computes its 2*M*(K/W)*N partial product; of its M x N partial sums, the
    # (W-1)/W owned by other ranks must leave it. HBM: read A and B shards, write its rows.
    m, k, n = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * m * n * 2,
        hbm_bytes=(m * k // w + k // w * n + m // w * n) * 2,
        flops=2 * m * n * k / w,
    )
