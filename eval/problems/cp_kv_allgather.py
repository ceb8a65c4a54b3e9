"""Context-parallel prefill: all-gather the new KV cache of variable-length sequences.

A batch of S sequences of different lengths L_s (each a multiple of W) is prefilled with the
tokens of every sequence split in W contiguous chunks, chunk r on rank r. Every rank holds
`kv` (sum_s L_s/W x 2 x Hkv x D bf16: its chunk of each sequence, sequences one after
another, K then V per token) and `cu_chunk` (S+1 int64, the prefix sums of L_s/W, the same on
every rank). Every rank returns the full packed KV of the batch (sum_s L_s x 2 x Hkv x D
bf16): sequence by sequence, each sequence's tokens in order (chunk 0 from rank 0, then chunk 1
from rank 1, ...), the layout the attention over the full context (and the KV cache) needs.

"Partial query, full key/value" context parallelism: TransformerEngine's
AttnFuncWithCPAndKVAllGather (and prefill context parallel in serving engines) all-gather K/V
before attention. The gather itself is regular; the interleaving per sequence is the work.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="cp_kv_allgather",
    name="Context-parallel KV all-gather of variable-length sequences",
    category="inference",
    source_repo="NVIDIA/TransformerEngine",
    source_file="transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py",
    source_function="AttnFuncWithCPAndKVAllGather.forward",
    world_sizes=(2, 4, 8),
    tags=("all_gather", "variable_size", "layout"),
)

NSEQ, MEAN_LEN, HKV, D = 8, 16384, 8, 128


def _lengths(world_size, seed, device, size):
    """Sequence lengths (multiples of 16 W) between 1/4 and 7/4 of the mean, seeded."""
    g = generator(seed * 1000 + 600, device)
    mean = scaled(MEAN_LEN, size**0.5, 16 * world_size)
    frac = torch.rand((NSEQ,), generator=g, device=device) * 1.5 + 0.25
    unit = 16 * world_size
    return [max(unit, int(f * mean) // unit * unit) for f in frac.tolist()]


def _heads(size):
    return scaled(HKV, size**0.25, 1), scaled(D, size**0.25, 16)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    lens = _lengths(world_size, seed, device, size)
    hkv, d = _heads(size)
    chunks = [n // world_size for n in lens]
    cu = torch.tensor([0] + chunks, device=device).cumsum(0)
    g = generator(seed * 1000 + rank, device)
    kv = randn((sum(chunks), 2, hkv, d), g, torch.bfloat16, device)
    return kv, cu


def reference(kv, cu_chunk):
    w = dist.get_world_size()
    gathered = torch.empty((w * kv.shape[0], *kv.shape[1:]), dtype=kv.dtype, device=kv.device)
    dist.all_gather_into_tensor(gathered, kv)
    gathered = gathered.view(w, *kv.shape)
    bounds = cu_chunk.tolist()
    pieces = []
    for s in range(len(bounds) - 1):
        pieces.append(gathered[:, bounds[s] : bounds[s + 1]].reshape(-1, *kv.shape[1:]))
    return torch.cat(pieces)


def roofline(world_size, size=1.0):
    # link: the (W-1)/W of the KV held elsewhere must arrive. The lengths depend on the seed;
    #       the bound uses the smallest total the length distribution allows (NSEQ sequences of
    #       at least a quarter of the mean), so it is a lower bound for every seed.
    # HBM:  read the local chunk, write the full KV (same minimum total).
    hkv, d = _heads(size)
    w = world_size
    mean = scaled(MEAN_LEN, size**0.5, 16 * w)
    unit = 16 * w
    min_total = NSEQ * max(unit, int(0.25 * mean) // unit * unit)
    per_token = 2 * hkv * d * 2
    return Roofline(
        link_bytes=(w - 1) / w * min_total * per_token,
        hbm_bytes=min_total / w * per_token + min_total * per_token,
        flops=0,
    )
