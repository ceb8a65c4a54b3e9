"""Stream-ordered signals between GPUs, for orchestrating library calls (cuBLAS, copy engine)
with peers: signal_peers runs after the work queued before it on the stream and makes that
work's writes visible to the peers; wait_peers holds the stream until every peer has signalled.

    f = kernels_lib.flags(world, tag="mine")
    torch.matmul(a, b, out=peer_view)        # writes into a peer's buffer
    signal_peers(f)                          # every peer's flag[me] = k, k = this round
    wait_peers(f)                            # until my flag[p] >= k for every peer p

The epochs live in device memory, so a CUDA graph of these calls replays correctly: this GPU
keeps, per flag, a count of the signals it sent to each rank's copy of the flag and a count of
its waits on its own copy; the signal and wait kernels bump them. The k-th signal into a flag
stores k, the k-th wait on a flag returns once it is >= k. Rule: in every round, every rank
signals each (rank, flag) at most once and waits on each of its flags at most once, the same
way every round; signals into one flag run in stream order, and so do waits on one flag. A
flag may be signalled ahead (e.g. once at setup: "slot free"), so that its k-th wait returns
on the (k-1)-th round's signal.
"""

from __future__ import annotations

import ctypes

SOURCE = r"""
#include <pk/signal.cuh>
// epochs: this GPU's counters for flags buffer f of n flags: [world][n] signals sent into rank
// r's flag i, then [n] waits on this rank's flag i. One thread bumps one counter.
__device__ __forceinline__ uint32_t bump(uint32_t* c) { const uint32_t e = *c + 1u; *c = e; return e; }
// One thread per peer: thread i signals rank peer_at(i)'s flag base + rank.
extern "C" __global__ void pk_signal_peers(pk::pbuf<uint32_t> f, uint32_t* epochs, unsigned n, unsigned base) {
  const int i = threadIdx.x + 1;
  if (i < f.world) {
    const int p = f.peer_at(i);
    pk::signal(f, p, base + f.rank, bump(epochs + (size_t)p * n + base + f.rank));
  }
}
// One thread per peer: thread i waits on this rank's flag base + peer_at(i).
extern "C" __global__ void pk_wait_peers(pk::pbuf<uint32_t> f, uint32_t* epochs, unsigned n, unsigned base,
                                         unsigned long long timeout_ns) {
  const int i = threadIdx.x + 1;
  if (i < f.world) {
    const unsigned j = base + f.peer_at(i);
    pk::wait(f, j, bump(epochs + (size_t)f.world * n + j), "wait_peers", timeout_ns);
  }
}
// One thread: signal rank `to`'s flag index.
extern "C" __global__ void pk_signal_one(pk::pbuf<uint32_t> f, uint32_t* epochs, unsigned n, int to, unsigned index) {
  if (threadIdx.x == 0) pk::signal(f, to, index, bump(epochs + (size_t)to * n + index));
}
// One thread: wait on this rank's flag index.
extern "C" __global__ void pk_wait_one(pk::pbuf<uint32_t> f, uint32_t* epochs, unsigned n, unsigned index,
                                       unsigned long long timeout_ns) {
  if (threadIdx.x == 0) pk::wait(f, index, bump(epochs + (size_t)f.world * n + index), "wait_peer", timeout_ns);
}
"""

DEFAULT_TIMEOUT_NS = 10_000_000_000


def _module():
    from kernels_lib.build import load

    return load(SOURCE, name="pk_sync")


def _epochs(flags_buf):
    """This GPU's signal/wait counters of flags_buf (made, zeroed, on first use: never during
    CUDA-graph capture, where the zeroing would be replayed)."""
    ep = flags_buf.extra.get("sync_epochs")
    if ep is None:
        import torch

        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("kernels_lib.sync: call signal/wait on these flags once before capturing a CUDA graph")
        ep = torch.zeros((flags_buf.world + 1) * flags_buf.tensor.numel(), dtype=torch.int32, device=flags_buf.tensor.device)
        torch.cuda.synchronize()  # zeroed before any stream uses it
        flags_buf.extra["sync_epochs"] = ep
    return ep


def _index(flags_buf, i: int, what: str) -> int:
    n = flags_buf.tensor.numel()
    if not 0 <= i < n:
        raise ValueError(f"{what}: flag {i} outside 0..{n - 1}")
    return i


def _threads(w: int) -> int:
    return 32 * ((w + 30) // 32)


def signal_peers(flags_buf, *, base: int = 0, stream: int | None = None) -> None:
    """On `stream`: after the work before it, signal every peer's flag base + rank."""
    w, n = flags_buf.world, flags_buf.tensor.numel()
    _index(flags_buf, base + w - 1, "signal_peers")
    if w > 1:
        _module().pk_signal_peers(
            1, _threads(w), [flags_buf.pbuf(), _epochs(flags_buf), ctypes.c_uint32(n), ctypes.c_uint32(base)], stream=stream
        )


def wait_peers(flags_buf, *, base: int = 0, stream: int | None = None, timeout_ns: int = DEFAULT_TIMEOUT_NS) -> None:
    """On `stream`: hold the work after it until every peer p has signalled flag base + p."""
    w, n = flags_buf.world, flags_buf.tensor.numel()
    _index(flags_buf, base + w - 1, "wait_peers")
    if w > 1:
        args = [flags_buf.pbuf(), _epochs(flags_buf), ctypes.c_uint32(n), ctypes.c_uint32(base), ctypes.c_uint64(timeout_ns)]
        _module().pk_wait_peers(1, _threads(w), args, stream=stream)


def signal_peer(flags_buf, to: int, index: int | None = None, *, stream: int | None = None) -> None:
    """On `stream`: after the work before it, signal rank `to`'s flag `index` (default: this rank's number)."""
    if not 0 <= to < flags_buf.world:
        raise ValueError(f"signal_peer: rank {to} outside 0..{flags_buf.world - 1}")
    i = _index(flags_buf, flags_buf.rank if index is None else index, "signal_peer")
    n = flags_buf.tensor.numel()
    args = [flags_buf.pbuf(), _epochs(flags_buf), ctypes.c_uint32(n), ctypes.c_int32(to), ctypes.c_uint32(i)]
    _module().pk_signal_one(1, 32, args, stream=stream)


def wait_peer(flags_buf, index: int, *, stream: int | None = None, timeout_ns: int = DEFAULT_TIMEOUT_NS) -> None:
    """On `stream`: hold the work after it until this rank's flag `index` has been signalled (once more)."""
    i = _index(flags_buf, index, "wait_peer")
    n = flags_buf.tensor.numel()
    args = [flags_buf.pbuf(), _epochs(flags_buf), ctypes.c_uint32(n), ctypes.c_uint32(i), ctypes.c_uint64(timeout_ns)]
    _module().pk_wait_one(1, 32, args, stream=stream)
