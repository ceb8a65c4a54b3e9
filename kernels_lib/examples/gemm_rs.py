"""GEMM + reduce-scatter: out = (a @ b) rows of this rank, summed over ranks. Each rank's partial
product for rank p's rows is written by cuBLAS straight into p's receive buffer (its stores
travel over NVLink while it computes), each followed by a stream-ordered signal; this rank's own
rows are out = received partial sums + a_own @ b (cuBLAS addmm, beta = 1). No separate
reduction pass, no copy. The rows may be cut into C chunks (PK_GEMM_RS_CHUNKS, default 1: on two
H200s one chunk took 797 us, two 856, four 938, eight 997; docs/kernels_lib_bench.md) and the work
interleaved: the peers' chunk 0, the peers' chunk 1, own chunk 0, the peers' chunk 2, own
chunk 1, ..., own chunk C-1; own chunk j waits only for the peers' chunk j, which they computed
a chunk earlier, so a skew between the ranks of up to a chunk's GEMM costs nothing.
Link bytes per rank: (W-1)/W * M * N * 2. The receive buffer has two slots used alternately;
before writing a slot of a peer, a rank waits until that peer has released it (its addmms on
the slot's last contents are done), so any sequence of calls, CUDA-graph replays included, is
safe. Epochs live on the GPU (kernels_lib.sync). Candidate for eval/problems/gemm_rs.py."""

import os

import torch

import kernels_lib as kl
from kernels_lib import sync
from kernels_lib.examples._common import world

CHUNKS = int(os.environ.get("PK_GEMM_RS_CHUNKS", 1))
_STATE: dict = {}


def chunk_rows(m: int, chunks: int) -> list[tuple[int, int]]:
    """[lo, hi) row ranges cutting m rows into at most `chunks` pieces of at least 128 rows."""
    c = max(1, min(chunks, m // 128))
    return [(m * j // c, m * (j + 1) // c) for j in range(c)]


def _setup(m: int, n: int) -> dict:
    rank, w = world()
    rows = chunk_rows(m, CHUNKS)
    c = len(rows)
    recv = kl.symm_buffer((2, w, m, n), torch.bfloat16, tag="gemm_rs")  # [slot][source rank]
    # flags: [c][w] "rank q's partial sums of chunk j have landed here", then [2][w] "q released slot s"
    flags = kl.flags((c + 2) * w, tag=f"gemm_rs:{m}x{n}:{c}")
    sync.signal_peers(flags, base=c * w)  # both slots start released
    sync.signal_peers(flags, base=(c + 1) * w)
    views = {
        (s, p, j): recv.peer(p, (hi - lo, n), torch.bfloat16, ((s * w + rank) * m + lo) * n)
        for s in (0, 1)
        for p in range(w)
        if p != rank
        for j, (lo, hi) in enumerate(rows)
    }
    return {"recv": recv, "flags": flags, "views": views, "rows": rows, "calls": 0}


def solution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    rank, w = world()
    a = a.contiguous()
    m, n = a.shape[0] // w, b.shape[1]
    st = _STATE.get((m, n)) or _STATE.setdefault((m, n), _setup(m, n))
    recv, flags, views, rows = st["recv"], st["flags"], st["views"], st["rows"]
    c = len(rows)
    st["calls"] += 1
    slot = st["calls"] & 1
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    a_own = a[rank * m : (rank + 1) * m]

    def peers_chunk(j: int) -> None:  # partial sums of chunk j for every peer, into its memory, then its flag
        lo, hi = rows[j]
        for i in range(1, w):
            p = (rank + i) % w
            if j == 0:
                sync.wait_peer(flags, (c + slot) * w + p)  # p released this slot
            torch.matmul(a[p * m + lo : p * m + hi], b, out=views[(slot, p, j)])
            sync.signal_peer(flags, p, j * w + rank)

    def own_chunk(j: int) -> None:  # out rows of chunk j = the peers' partial sums + a_own @ b
        lo, hi = rows[j]
        sync.wait_peers(flags, base=j * w)
        got = [recv.tensor[slot, (rank - i) % w, lo:hi] for i in range(1, w)]
        acc = got[0] if w == 2 else torch.stack(got).sum(0, dtype=torch.float32).to(a.dtype)
        torch.addmm(acc, a_own[lo:hi], b, out=out[lo:hi])

    if w == 1:
        return torch.matmul(a, b, out=out)
    peers_chunk(0)
    for j in range(1, c):
        peers_chunk(j)
        own_chunk(j - 1)
    own_chunk(c - 1)
    sync.signal_peers(flags, base=(c + slot) * w)  # this slot is free again for every peer
    return out
