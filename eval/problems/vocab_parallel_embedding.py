"""Vocabulary-parallel embedding lookup.

The embedding table (V x H) is split by rows over the tensor-parallel ranks: rank r holds
`weight` (V/W x H bf16), rows [r*V/W, (r+1)*V/W). Every rank holds the same token ids `ids`
(T int64, values in [0, V)). Every rank returns the (T, H) bf16 embeddings of all tokens:
each rank looks up the ids that fall in its range (zeros for the others) and the partial
results are summed over ranks (exactly one rank contributes each row).

Megatron's VocabParallelEmbedding does the masked lookup and an all-reduce; since every row
comes from exactly one rank, a gather-style exchange moves half the bytes.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="vocab_parallel_embedding",
    name="Vocab-parallel embedding (masked lookup + all-reduce)",
    category="tensor",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/tensor_parallel/layers.py",
    source_function="VocabParallelEmbedding.forward",
    world_sizes=(2, 4, 8),
    tags=("embedding", "gather"),
)

T, V, H = 16384, 131072, 8192


def _dims(world_size, size):
    f = size ** (1 / 3)
    return scaled(T, f, 16), scaled(V, f, 64 * world_size), scaled(H, f, 64)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, v, h = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    weight = randn((v // world_size, h), g, torch.bfloat16, device)
    gi = generator(seed * 1000 + 999, device)  # the same ids on every rank
    ids = torch.randint(0, v, (t,), generator=gi, device=device)
    return ids, weight


def reference(ids, weight):
    rank = dist.get_rank()
    rows = weight.shape[0]
    start = rank * rows
    outside = (ids < start) | (ids >= start + rows)
    local = (ids - start).masked_fill(outside, 0)
    out = F.embedding(local, weight)
    out[outside] = 0
    dist.all_reduce(out)
    return out


def roofline(world_size, size=1.0):
    # link: each output row lives on exactly one rank; every rank must receive the rows it
    #       does not own: (W-1)/W of T x H bf16 in expectation over the uniform ids (an
    #       all-gather's volume; the deviation at the default T is far below 1%).
    # HBM:  read the ids and the owned rows (T/W x H expected), write the T x H output.
    # FLOPs: none.
    t, v, h = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * t * h * 2,
        hbm_bytes=t * 8 + t / w * h * 2 + t * h * 2,
        flops=0,
    )
