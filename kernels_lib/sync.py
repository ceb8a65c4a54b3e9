"""Stream-ordered signals between GPUs, for orchestrating library calls (cuBLAS, copy engine)
with peers: signal_peers runs after the work queued before it on the stream and makes that
work's writes visible to the peers; wait_peers holds the stream until every peer has signalled.

    f = kernels_lib.flags(world, tag="mine"); e = f.next_epoch()
    torch.matmul(a, b, out=peer_view)        # writes into a peer's buffer
    signal_peers(f, e)                       # peers' flag[me] = e
    wait_peers(f, e)                         # until my flag[p] >= e for every peer p
"""

from __future__ import annotations

import ctypes

SOURCE = r"""
#include <pk/signal.cuh>
// One thread per peer: thread i stores epoch into rank peer_at(i)'s flag base + rank.
extern "C" __global__ void pk_signal_peers(pk::pbuf<uint32_t> f, unsigned base, unsigned epoch) {
  const int i = threadIdx.x + 1;
  if (i < f.world) pk::signal(f, f.peer_at(i), base + f.rank, epoch);
}
// One thread per peer: thread i waits until flag base + peer_at(i) >= epoch.
extern "C" __global__ void pk_wait_peers(pk::pbuf<uint32_t> f, unsigned base, unsigned epoch, unsigned long long timeout_ns) {
  const int i = threadIdx.x + 1;
  if (i < f.world) pk::wait(f, base + f.peer_at(i), epoch, "wait_peers", timeout_ns);
}
// One thread: store epoch into rank `to`'s flag index.
extern "C" __global__ void pk_signal_one(pk::pbuf<uint32_t> f, int to, unsigned index, unsigned epoch) {
  if (threadIdx.x == 0) pk::signal(f, to, index, epoch);
}
// One thread: wait until flag index >= epoch.
extern "C" __global__ void pk_wait_one(pk::pbuf<uint32_t> f, unsigned index, unsigned epoch, unsigned long long timeout_ns) {
  if (threadIdx.x == 0) pk::wait(f, index, epoch, "wait_peer", timeout_ns);
}
"""

DEFAULT_TIMEOUT_NS = 10_000_000_000


def _module():
    from kernels_lib.build import load

    return load(SOURCE, name="pk_sync")


def signal_peers(flags_buf, epoch: int, base: int = 0, stream: int | None = None) -> None:
    """On `stream`: after the work before it, store epoch into every peer's flag base + rank."""
    w = flags_buf.world
    if w > 1:
        _module().pk_signal_peers(
            1, 32 * ((w + 30) // 32), [flags_buf.pbuf(), ctypes.c_uint32(base), ctypes.c_uint32(epoch)], stream=stream
        )


def wait_peers(flags_buf, epoch: int, base: int = 0, stream: int | None = None, timeout_ns: int = DEFAULT_TIMEOUT_NS) -> None:
    """On `stream`: hold the work after it until flag base + p >= epoch for every peer p."""
    w = flags_buf.world
    if w > 1:
        _module().pk_wait_peers(
            1,
            32 * ((w + 30) // 32),
            [flags_buf.pbuf(), ctypes.c_uint32(base), ctypes.c_uint32(epoch), ctypes.c_uint64(timeout_ns)],
            stream=stream,
        )


def wait_peer(flags_buf, epoch: int, index: int, stream: int | None = None, timeout_ns: int = DEFAULT_TIMEOUT_NS) -> None:
    """On `stream`: hold the work after it until this rank's flag `index` >= epoch."""
    _module().pk_wait_one(
        1, 32, [flags_buf.pbuf(), ctypes.c_uint32(index), ctypes.c_uint32(epoch), ctypes.c_uint64(timeout_ns)], stream=stream
    )


def signal_peer(flags_buf, epoch: int, to: int, index: int | None = None, stream: int | None = None) -> None:
    """On `stream`: store epoch into rank `to`'s flag `index` (default: this rank's number)."""
    i = flags_buf.rank if index is None else index
    _module().pk_signal_one(
        1, 32, [flags_buf.pbuf(), ctypes.c_int32(to), ctypes.c_uint32(i), ctypes.c_uint32(epoch)], stream=stream
    )
