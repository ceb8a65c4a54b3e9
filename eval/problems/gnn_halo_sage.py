"""Full-graph GNN layer on a partitioned graph: halo feature exchange + GraphSAGE (mean) layer.

The nodes are partitioned over the ranks: rank r owns nodes [r*n, (r+1)*n) with features
`feat` (n x F float32). Each owned node has `deg` = 16 in-neighbours, `nbr` (n x 16 int64,
global node ids; about 80% inside the partition, the rest uniform over the other
partitions, as after a METIS-like partitioning). `send_idx` is a list of W int64 tensors:
send_idx[j] holds, sorted, the LOCAL indices of this rank's nodes that rank j's neighbour
lists reference (empty for j = r): the boundary nodes j needs. `weight` (2F x Fout float32)
is the layer's weight. Every rank returns, for its nodes (n x Fout float32),

    out[i] = relu(concat(feat[i], mean over the 16 neighbours u of i of feat[u]) @ weight),

where remote neighbours' features come from their owners (a neighbour listed twice counts
twice). BNS-GCN / PipeGCN exchange exactly these boundary features with an all-to-all before
each layer; the receiving side needs them in the order of its sorted halo ids.
"""

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="gnn_halo_sage",
    name="GNN halo exchange + GraphSAGE mean aggregation (partitioned graph)",
    category="graph",
    source_repo="GATECH-EIC/BNS-GCN",
    source_file="helper/feature_buffer.py",
    source_function="Buffer.update (boundary feature all-to-all) with a GraphSAGE layer",
    world_sizes=(2, 4, 8),
    dtype="float32",
    atol=1e-4,
    rtol=1e-3,
    tags=("all_to_all", "variable_size", "gather"),
)

N_PER_RANK, F_IN, F_OUT, DEG, P_LOCAL = 131072, 128, 128, 16, 0.8


def _dims(size):
    return scaled(N_PER_RANK, size**0.5, 16), scaled(F_IN, size**0.25, 8), scaled(F_OUT, size**0.25, 8)


def neighbours(src, world_size, seed, device, n):
    """The in-neighbour lists (n x DEG global ids) of rank `src`'s nodes, seeded per rank."""
    g = generator(seed * 1000 + 400 + src, device)
    local = torch.randint(0, n, (n, DEG), generator=g, device=device) + src * n
    other = torch.randint(0, (world_size - 1) * n, (n, DEG), generator=g, device=device)
    other = other + (other >= src * n) * n  # skip this rank's own range
    remote = torch.rand((n, DEG), generator=g, device=device) >= P_LOCAL
    return torch.where(remote, other, local)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    n, f, fo = _dims(size)
    g = generator(seed * 1000 + rank, device)
    feat = randn((n, f), g, torch.float32, device)
    weight = randn((2 * f, fo), generator(seed * 1000 + 999, device), torch.float32, device, scale=(2 * f) ** -0.5)
    nbr = neighbours(rank, world_size, seed, device, n)
    send_idx = []
    for j in range(world_size):
        if j == rank:
            send_idx.append(torch.empty((0,), dtype=torch.int64, device=device))
            continue
        ids = neighbours(j, world_size, seed, device, n).reshape(-1)
        mine = ids[(ids >= rank * n) & (ids < (rank + 1) * n)]
        send_idx.append(torch.unique(mine) - rank * n)  # sorted
    return feat, nbr, send_idx, weight


def reference(feat, nbr, send_idx, weight):
    rank, w = dist.get_rank(), dist.get_world_size()
    n = feat.shape[0]
    start = rank * n
    is_local = (nbr >= start) & (nbr < start + n)
    halo_ids = torch.unique(nbr[~is_local])  # sorted, so grouped by owner in rank order
    recv_counts = torch.bincount(halo_ids // n, minlength=w).tolist()
    send = torch.cat([feat[idx] for idx in send_idx])
    halo = feat.new_empty((len(halo_ids), feat.shape[1]))
    dist.all_to_all_single(halo, send, recv_counts, [len(idx) for idx in send_idx])
    table = torch.cat([feat, halo])
    rows = torch.where(is_local, nbr - start, n + torch.searchsorted(halo_ids, nbr))
    agg = F.embedding_bag(rows, table, mode="mean")
    return torch.relu(torch.cat([feat, agg], dim=1) @ weight)


def roofline(world_size, size=1.0):
    # link: every distinct remote node referenced must arrive once. With r = n DEG (1-P_LOCAL)
    #       references spread uniformly over R = (W-1) n remote nodes, the expected number of
    #       distinct ones is R (1 - exp(-r/R)); each brings F float32.
    # HBM:  read the features, the neighbour ids and the halo once; write the output.
    # FLOPs: the mean (DEG F adds per node) and the (n x 2F) @ (2F x Fout) GEMM.
    n, f, fo = _dims(size)
    w = world_size
    refs, remote = n * DEG * (1 - P_LOCAL), (w - 1) * n
    halo = remote * (1 - math.exp(-refs / remote))
    return Roofline(
        link_bytes=halo * f * 4,
        hbm_bytes=n * f * 4 + n * DEG * 8 + halo * f * 4 + n * fo * 4,
        flops=n * DEG * f + 2 * n * 2 * f * fo,
    )
