"""Reduce-scatter (sum) of bf16 tensors.

Every rank holds `x` of world_size * n elements; rank r returns a new tensor of n elements,
the sum over ranks of the r-th chunk of `x`. As in ZeRO/FSDP gradient reduction and the
output of row-parallel linear layers under sequence parallelism.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="reduce_scatter",
    name="reduce-scatter",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/reduce_scatter.cu",
    source_function="ReduceScatterRunColl",
    world_sizes=(2, 4, 8),
)

N = 32 * 2**20  # elements of each rank's output: 64 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((world_size * scaled(N, size, 1024),), g, torch.bfloat16, device),)


def reference(x):
    out = torch.empty(x.numel() // dist.get_world_size(), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x)
    return out


def roofline(world_size, size=1.0):
    # Rank r needs the r-th chunk of every other rank (or partial sums of them): at least
    # (W-1) * n * 2 bytes received. HBM: read all of x, write the chunk.
    b = scaled(N, size, 1024) * 2
    w = world_size
    return Roofline(link_bytes=(w - 1) * b, hbm_bytes=w * b + b, flops=(w - 1) * b / 2)
