"""Distributed sort with exact balance (sample sort).

Every rank holds `keys` (N float32, random). Every rank returns N float32 keys: rank r gets
elements [r*N, (r+1)*N) of the ascending sort of all W*N keys (so the output keeps the input's
distribution over the ranks, as Heat's distributed sort does).

The reference sorts locally, picks splitters from a regular sample of every rank, exchanges
the buckets with an uneven all-to-all, merges, and then moves the few elements needed to
restore exactly N per rank with a second, small all-to-all.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="sample_sort",
    name="Distributed sample sort with exact rebalancing",
    category="other",
    source_repo="helmholtz-analytics/heat",
    source_file="heat/core/manipulations.py",
    source_function="sort",
    world_sizes=(2, 4, 8),
    dtype="float32",
    tags=("all_to_all", "variable_size", "sort"),
)

N = 64 * 2**20
OVERSAMPLE = 64


def _n(size):
    return scaled(N, size, 256)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((_n(size),), g, torch.float32, device),)


def _exchange(data, send_counts):
    counts = torch.tensor(send_counts, dtype=torch.int64, device=data.device)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)
    out = data.new_empty((int(recv_counts.sum()),))
    dist.all_to_all_single(out, data, recv_counts.tolist(), send_counts)
    return out


def reference(keys):
    w = dist.get_world_size()
    n = keys.shape[0]
    local = keys.sort().values
    # splitters from a regular sample of every rank
    m = OVERSAMPLE * w  # evenly spaced positions, in integers (a float32 linspace can round to n)
    pick = torch.arange(m, device=keys.device) * (n - 1) // (m - 1)
    sample = torch.empty((w * OVERSAMPLE * w,), dtype=keys.dtype, device=keys.device)
    dist.all_gather_into_tensor(sample, local[pick].contiguous())
    sample = sample.sort().values
    splitters = sample[OVERSAMPLE * w * torch.arange(1, w, device=keys.device)]
    bounds = torch.searchsorted(local, splitters).tolist()
    send = [b - a for a, b in zip([0] + bounds, bounds + [n])]
    merged = _exchange(local, send).sort().values
    # rebalance: element at global position p belongs to rank p // n
    sizes = torch.tensor([merged.shape[0]], dtype=torch.int64, device=keys.device)
    all_sizes = torch.empty((w,), dtype=torch.int64, device=keys.device)
    dist.all_gather_into_tensor(all_sizes, sizes)
    start = int(all_sizes[: dist.get_rank()].sum())
    end = start + merged.shape[0]
    send = [max(0, min(end, (j + 1) * n) - max(start, j * n)) for j in range(w)]
    return _exchange(merged, send)


def roofline(world_size, size=1.0):
    # link: with random keys, each key lands on a uniformly random rank: (W-1)/W of the 4 N
    #       bytes must leave (in expectation) and as much arrives.
    # HBM:  read the keys and write the output once (the minimum; sorting takes more passes).
    # FLOPs: none counted (comparisons and data movement).
    n = _n(size)
    w = world_size
    return Roofline(link_bytes=(w - 1) / w * n * 4, hbm_bytes=2 * n * 4, flops=0)
