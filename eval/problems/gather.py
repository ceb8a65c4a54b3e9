"""Gather of bf16 shards to rank 0.

Every rank holds `x` of n elements; rank 0 returns a new tensor of shape (world_size, n) whose
row r is rank r's `x`; the other ranks return None.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="gather",
    name="gather",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/gather.cu",
    source_function="GatherRunColl",
    world_sizes=(2, 4, 8),
)

N = 32 * 2**20  # elements per rank: 64 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((scaled(N, size, 1024),), g, torch.bfloat16, device),)


def reference(x):
    rank, w = dist.get_rank(), dist.get_world_size()
    out = torch.empty((w, x.numel()), dtype=x.dtype, device=x.device) if rank == 0 else None
    dist.gather(x, gather_list=list(out.unbind(0)) if rank == 0 else None, dst=0)
    return out


def roofline(world_size, size=1.0):
    # Rank 0 must receive W-1 shards of n elements. HBM on rank 0: write (W) rows, read its own.
    b = scaled(N, size, 1024) * 2
    w = world_size
    return Roofline(link_bytes=(w - 1) * b, hbm_bytes=w * b + b, flops=0)
