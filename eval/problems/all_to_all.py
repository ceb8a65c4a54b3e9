"""All-to-all of equal bf16 chunks.

Every rank holds `x` of world_size * n elements, chunk j destined for rank j; rank r returns a
new tensor whose chunk j is the r-th chunk of rank j's `x`. The exchange at the heart of
expert parallelism and Ulysses sequence parallelism.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="all_to_all",
    name="all-to-all",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/alltoall.cu",
    source_function="AlltoAllRunColl",
    world_sizes=(2, 4, 8),
)

N = 16 * 2**20  # elements per chunk: 32 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((world_size * scaled(N, size, 1024),), g, torch.bfloat16, device),)


def reference(x):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out


def roofline(world_size, size=1.0):
    # Each rank sends W-1 chunks and receives W-1 chunks of n elements. HBM: read x, write out.
    b = scaled(N, size, 1024) * 2
    w = world_size
    return Roofline(link_bytes=(w - 1) * b, hbm_bytes=2 * w * b, flops=0)
