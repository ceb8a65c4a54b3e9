"""Scatter of bf16 chunks from rank 0.

Every rank holds `x` of shape (world_size, n) (only rank 0's values matter); rank r returns a
new tensor of n elements equal to rank 0's `x[r]`.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="scatter",
    name="scatter",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/scatter.cu",
    source_function="ScatterRunColl",
    world_sizes=(2, 4, 8),
)

N = 32 * 2**20  # elements per chunk: 64 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((world_size, scaled(N, size, 1024)), g, torch.bfloat16, device),)


def reference(x):
    out = torch.empty_like(x[0])
    chunks = list(x.unbind(0)) if dist.get_rank() == 0 else None
    dist.scatter(out, scatter_list=chunks, src=0)
    return out


def roofline(world_size, size=1.0):
    # Rank 0 must send W-1 chunks of n elements. HBM on rank 0: read them, write its own chunk.
    b = scaled(N, size, 1024) * 2
    w = world_size
    return Roofline(link_bytes=(w - 1) * b, hbm_bytes=w * b + b, flops=0)
