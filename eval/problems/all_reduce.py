"""All-reduce (sum) of one bf16 tensor per rank.

Every rank holds a tensor `x` of n elements; every rank returns a new tensor, the element-wise
sum of all ranks' `x`. The inputs are not modified. The most used collective in data and
tensor parallel training (gradient and activation reductions).
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="all_reduce",
    name="all-reduce",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/all_reduce.cu",
    source_function="AllReduceRunColl",
    world_sizes=(2, 4, 8),
)

N = 64 * 2**20  # elements per rank: 128 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((scaled(N, size, 1024),), g, torch.bfloat16, device),)


def reference(x):
    out = x.clone()
    dist.all_reduce(out)
    return out


def roofline(world_size, size=1.0):
    # Without in-network reduction every rank must send (and receive) at least
    # 2 (W-1)/W of its tensor: (W-1)/W to reduce its peers' shards, (W-1)/W to spread the
    # reduced shards back (the bus-bandwidth factor of nccl-tests). HBM: read x, write the out.
    b = scaled(N, size, 1024) * 2
    w = world_size
    return Roofline(link_bytes=2 * (w - 1) / w * b, hbm_bytes=2 * b, flops=(w - 1) / w * b / 2)
