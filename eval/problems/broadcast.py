"""Broadcast of a bf16 tensor from rank 0.

Every rank holds `x` of n elements (only rank 0's values matter); every rank returns a new
tensor equal to rank 0's `x`. As in broadcasting parameters or a sampled batch from one rank.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="broadcast",
    name="broadcast",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/broadcast.cu",
    source_function="BroadcastRunColl",
    world_sizes=(2, 4, 8),
)

N = 64 * 2**20  # elements: 128 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((scaled(N, size, 1024),), g, torch.bfloat16, device),)


def reference(x):
    out = x.clone()
    dist.broadcast(out, src=0)
    return out


def roofline(world_size, size=1.0):
    # Each non-root rank must receive n elements; the root must send them at least once
    # (relaying through peers). HBM: read the source, write the output.
    b = scaled(N, size, 1024) * 2
    return Roofline(link_bytes=b, hbm_bytes=2 * b, flops=0)
