"""All-gather + GEMM: the sequence-parallel column-parallel linear layer.

Every rank holds `a`, its shard of M/W rows of the activations (M x K overall, sharded on M),
and `b`, its own K x N weight shard (column-parallel: each rank owns different output columns).
Every rank returns all_gather(a) @ b, of shape (M, N). A fused kernel overlaps the gather of
remote rows with the GEMM of rows already present.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="ag_gemm",
    name="All-gather + GEMM (column-parallel linear, sequence parallel)",
    category="tensor",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/tensor_parallel/layers.py",
    source_function="LinearWithGradAccumulationAndAsyncCommunication.forward",
    world_sizes=(2, 4, 8),
    tags=("overlap", "gemm"),
)

M, K, N = 8192, 8192, 8192


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    m = scaled(M, size ** (1 / 3), 128 * world_size)
    k = scaled(K, size ** (1 / 3), 128)
    n = scaled(N, size ** (1 / 3), 128)
    g = generator(seed * 1000 + rank, device)
    a = randn((m // world_size, k), g, torch.bfloat16, device)
    b = randn((k, n), g, torch.bfloat16, device, scale=k**-0.5)
    return a, b


def reference(a, b):
    w = dist.get_world_size()
    full = torch.empty((a.shape[0] * w, a.shape[1]), dtype=a.dtype, device=a.device)
    dist.all_gather_into_tensor(full, a)
    return full @ b


def roofline(world_size, size=1.0):
    # Each rank must receive the (W-1)/W of A it does not hold, and compute the full
    # 2*M*N*K GEMM. HBM: read A and B once, write C.
    m = scaled(M, size ** (1 / 3), 128 * world_size)
    k = scaled(K, size ** (1 / 3), 128)
    n = scaled(N, size ** (1 / 3), 128)
    w = world_size
    return Roofline(link_bytes=(w - 1) / w * m * k * 2, hbm_bytes=(m * k + k * n + m * n) * 2, flops=2 * m * n * k)
