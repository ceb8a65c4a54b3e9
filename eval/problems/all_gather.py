"""All-gather of one bf16 shard per rank.

Every rank holds a shard `x` of n elements; every rank returns a new tensor of world_size * n
elements, the shards concatenated in rank order. As in FSDP parameter gathering and sequence
parallel activations.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="all_gather",
    name="all-gather",
    category="collective",
    source_repo="NVIDIA/nccl-tests",
    source_file="src/all_gather.cu",
    source_function="AllGatherRunColl",
    world_sizes=(2, 4, 8),
)

N = 32 * 2**20  # elements per rank: 64 MiB of bf16


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((scaled(N, size, 1024),), g, torch.bfloat16, device),)


def reference(x):
    out = torch.empty(x.numel() * dist.get_world_size(), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x)
    return out


def roofline(world_size, size=1.0):
    # Every rank must receive the W-1 shards it does not hold: (W-1) * n * 2 bytes.
    # HBM: read its shard, write the whole output.
    b = scaled(N, size, 1024) * 2
    w = world_size
    return Roofline(link_bytes=(w - 1) * b, hbm_bytes=b + w * b, flops=0)
