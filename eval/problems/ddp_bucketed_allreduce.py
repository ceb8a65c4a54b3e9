"""DDP gradient synchronisation: bucketed all-reduce of many gradients of different shapes.

Every rank holds `grads`, a list of float32 gradient tensors with the parameter shapes of a
two-layer Llama-style transformer slice (attention and MLP weights, norm weights, biases of
odd lengths). Every rank returns a new list of the same shapes: each gradient averaged over
the ranks (sum over ranks / W).

PyTorch DDP packs gradients, in reverse registration order, into buckets of about 25 MiB,
all-reduces each flat bucket (divided by the world size first) and copies the results back.
Bucket boundaries are free: a solution may fuse, split or overlap as it likes, but every
element must be the average.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="ddp_bucketed_allreduce",
    name="DDP bucketed gradient all-reduce (many tensors, mixed sizes)",
    category="data",
    source_repo="pytorch/pytorch",
    source_file="torch/csrc/distributed/c10d/reducer.cpp",
    source_function="Reducer::all_reduce_bucket (with default_hooks.allreduce_hook)",
    world_sizes=(2, 4, 8),
    dtype="float32",
    tags=("all_reduce", "variable_size", "bucketing"),
)

LAYERS, H, I = 2, 2048, 5632
BUCKET_BYTES = 25 * 2**20


def shapes(size):
    h, i = scaled(H, size**0.5, 8), scaled(I, size**0.5, 8)
    out = []
    for _ in range(LAYERS):
        out += [(h,), (3 * h, h), (3 * h,), (h, h), (h,), (2 * i, h), (h, i), (h + 3,), (7,)]
    return out


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return ([randn(s, g, torch.float32, device, scale=1e-2) for s in shapes(size)],)


def reference(grads):
    w = dist.get_world_size()
    out = [torch.empty_like(t) for t in grads]
    order = list(range(len(grads)))[::-1]  # DDP fills buckets in reverse registration order
    buckets, cur, nbytes = [], [], 0
    for i in order:
        cur.append(i)
        nbytes += grads[i].numel() * grads[i].element_size()
        if nbytes >= BUCKET_BYTES:
            buckets.append(cur)
            cur, nbytes = [], 0
    if cur:
        buckets.append(cur)
    for b in buckets:
        flat = torch.cat([grads[i].reshape(-1) for i in b]).div_(w)
        dist.all_reduce(flat)
        offset = 0
        for i in b:
            n = grads[i].numel()
            out[i].copy_(flat[offset : offset + n].view_as(grads[i]))
            offset += n
    return out


def roofline(world_size, size=1.0):
    # link: every element is a sum over ranks needed everywhere: all-reduce, 2 (W-1)/W of the
    #       gradient bytes. HBM: read the gradients, write the averages. FLOPs: one add per
    #       element per incoming contribution (W-1)/W, one scale.
    n = sum(torch.Size(s).numel() for s in shapes(size))
    w = world_size
    return Roofline(link_bytes=2 * (w - 1) / w * n * 4, hbm_bytes=2 * n * 4, flops=2 * n)
