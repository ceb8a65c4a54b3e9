"""Reduce (sum) of bf16 tensors to rank 0.

Every rank holds `x` of n elements; rank 0 returns a new tensor, the element-wise sum of all
ranks' `x`; the other ranks return None. The inputs are not modified.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="reduce",
    name="reduce",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/reduce.cu",
    source_function="ReduceRunColl",
    world_sizes=(2, 4, 8),
)

N = 64 * 2**20  # elements per rank: 128 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((scaled(N, size, 1024),), g, torch.bfloat16, device),)


def reference(x):
    out = x.clone()
    dist.reduce(out, dst=0)
    return out if dist.get_rank() == 0 else None


def roofline(world_size, size=1.0):
    # The sum of the other ranks' tensors is n elements that rank 0 does not hold: rank 0 must
    # receive at least n elements. HBM: read x, write the output.
    b = scaled(N, size, 1024) * 2
    w = world_size
    return Roofline(link_bytes=b, hbm_bytes=2 * b, flops=(w - 1) * b / 2 / w)
