"""Exact k-nearest-neighbour search over a database sharded across ranks.

The database of Nd vectors (D = 128 int8 codes, a scalar-quantised index) is split in
contiguous shards: rank r holds `db` (Nd/W x D int8), vectors with global ids
[r*Nd/W, (r+1)*Nd/W). Every rank holds the same queries `queries` (Q x D int8). Every rank
returns (dist, ids): for each query the k = 16 nearest database vectors by squared L2
distance of the codes, in increasing order of distance, ties broken by the smaller global id;
dist as float32 (exact integers), ids as int64.

The codes lie in [-8, 8], so every distance is an exact integer in float32, bf16 and TF32
arithmetic: results are exact whatever the summation order. Faiss's IndexShards searches each
shard and merges the per-shard top-k; the merge is the only communication.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, scaled

META = Meta(
    id="sharded_knn",
    name="Sharded exact k-NN search (int8 codes, merged top-k)",
    category="other",
    source_repo="facebookresearch/faiss",
    source_file="faiss/IndexShards.cpp",
    source_function="IndexShardsTemplate::search (per-shard search, merge of results)",
    world_sizes=(2, 4, 8),
    dtype="float32",
    tags=("selection", "gemm", "search"),
)

ND, D, Q, K = 2**22, 128, 2048, 16
CHUNK = 2**18  # database rows per distance block in the reference


def _dims(world_size, size):
    return scaled(ND, size**0.5, 64 * world_size), scaled(D, size**0.25, 8), scaled(Q, size**0.25, 8)


def _codes(shape, g, device):
    return torch.randint(-8, 9, shape, generator=g, device=device).to(torch.int8)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    nd, d, q = _dims(world_size, size)
    db = _codes((nd // world_size, d), generator(seed * 1000 + rank, device), device)
    queries = _codes((q, d), generator(seed * 1000 + 999, device), device)
    return db, queries


def reference(db, queries):
    rank, w = dist.get_rank(), dist.get_world_size()
    nl = db.shape[0]
    ntot = nl * w
    qf = queries.float()
    qn = qf.pow(2).sum(1, keepdim=True)
    best = None
    for s in range(0, nl, CHUNK):
        xf = db[s : s + CHUNK].float()
        d2 = qn - 2 * qf @ xf.t() + xf.pow(2).sum(1)[None, :]  # exact integers
        ids = torch.arange(s, s + xf.shape[0], device=db.device) + rank * nl
        keys = d2.to(torch.int64) * ntot + ids[None, :]  # distance first, then id
        keys = keys.topk(min(K, keys.shape[1]), dim=1, largest=False).values
        best = keys if best is None else torch.cat([best, keys], 1).topk(K, dim=1, largest=False).values
    everyone = torch.empty((w * best.shape[0], K), dtype=torch.int64, device=db.device)
    dist.all_gather_into_tensor(everyone, best)
    merged = everyone.view(w, -1, K).permute(1, 0, 2).reshape(best.shape[0], -1)
    top = merged.topk(K, dim=1, largest=False, sorted=True).values
    return (top // ntot).to(torch.float32), top % ntot


def roofline(world_size, size=1.0):
    # link: in expectation (W-1)/W of each query's k results are in other shards; each needs
    #       a distance and an id (4 + 4 B) to arrive: (W-1)/W Q k 8 B.
    # HBM:  read the int8 shard and the queries; write the results.
    # FLOPs: the distance GEMM, 2 Q (Nd/W) D.
    nd, d, q = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * q * K * 8,
        hbm_bytes=nd // w * d + q * d + q * K * 12,
        flops=2 * q * nd / w * d,
    )
