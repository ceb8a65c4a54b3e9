"""All-gather: sender SMs push this rank's shard into every peer's receive buffer, tile by
tile, each tile followed by a flag; receiver SMs copy each peer's tile into place as its flag
arrives, and this rank's own shard (pk::split_grid: the two roles overlap).
Two send mechanisms: 16-byte stores from all threads ("reg", the default), or TMA bulk copies
issued by one thread per block through a ring of shared-memory stages ("tma").
Link bytes per rank: (W-1) * n, the minimum. Candidate for eval/problems/all_gather.py.

Tuning (environment, read at import, for sweeps): PK_ALL_GATHER (mechanism), PK_AG_TILE_KIB
(the tile: what a sender pushes between two flags, one flag per tile and peer; default from
_common.plan, n/64 within 4..256 KiB), PK_AG_TMA_CHUNK_KIB and PK_AG_TMA_STAGES (the TMA ring,
default 4 stages of 32 KiB), PK_MAX_SENDERS / PK_MAX_RECEIVERS (block counts, default 32 / 96)."""

import ctypes
import os

import torch

import kernels_lib as kl
from kernels_lib.examples._common import Launch, check_input, plan, world

STAGES = int(os.environ.get("PK_AG_TMA_STAGES", 4))  # TMA ring: STAGES stages of CHUNK bytes
CHUNK = int(os.environ.get("PK_AG_TMA_CHUNK_KIB", 32)) * 1024
TILE = int(os.environ.get("PK_AG_TILE_KIB", 0)) * 1024  # 0: from plan()

SOURCE = r"""
#include <pk/pk.cuh>
using T = __nv_bfloat16;
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CHUNK_KIB
#define CHUNK_KIB 32
#endif
constexpr unsigned CHUNK = CHUNK_KIB * 1024;

// One tile of x (bytes at byte offset off) -> every peer's recv, by one thread with TMA.
__device__ void send_tile_tma(const char* src, const pk::pbuf<T>& recv, size_t dst_off, unsigned bytes,
                              unsigned char* stage, uint64_t* bars, uint32_t& k) {
  for (unsigned off = 0; off < bytes; off += CHUNK, ++k) {
    const int s = k % STAGES;
    const unsigned len = min(CHUNK, bytes - off);
    if (k >= STAGES) pk::tma::wait_read<STAGES - 1>();  // the stores that read stage s are done
    pk::tma::bar_expect(&bars[s], len);
    pk::tma::load(stage + s * CHUNK, src + off, len, &bars[s]);
    pk::tma::bar_wait(&bars[s], (k / STAGES) & 1);
    for (int i = 1; i < recv.world; ++i)
      pk::tma::store(reinterpret_cast<char*>(recv[recv.peer_at(i)]) + dst_off + off, stage + s * CHUNK, len);
    pk::tma::commit();
  }
  pk::tma::wait_writes();
}

// recv: [2 parities][world][n] per rank; flags: [world][tiles]; epochs: one launch counter per
// block (pk::block_epoch).
template <bool TMA>
__device__ void all_gather(const T* x, T* out, const pk::pbuf<T>& recv, const pk::pbuf<uint32_t>& flags,
                           size_t n, unsigned tile, uint32_t* epochs, int senders) {
  extern __shared__ __align__(128) unsigned char smem[];
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  const int me = recv.rank, W = recv.world;
  const size_t tiles = (n + tile - 1) / tile, slot = (size_t)(epoch & 1) * W * n;
  pk::split_grid(senders,
    [&](int b, int nb) {
      if (TMA) {  // one thread issues every copy; the others leave the role and wait in ep.done()
        if (threadIdx.x != 0) return;
        uint64_t* bars = reinterpret_cast<uint64_t*>(smem + STAGES * CHUNK);
        for (int s = 0; s < STAGES; ++s) pk::tma::bar_init(&bars[s]);
        uint32_t k = 0;
        for (size_t t = b; t < tiles; t += nb) {
          const size_t lo = t * tile, len = min((size_t)tile, n - lo);
          send_tile_tma(reinterpret_cast<const char*>(x + lo), recv, (slot + me * n + lo) * sizeof(T), len * sizeof(T), smem, bars, k);
          for (int i = 1; i < W; ++i) pk::signal(flags, recv.peer_at(i), me * tiles + t, epoch);
        }
        return;
      }
      for (size_t t = b; t < tiles; t += nb) {
        const size_t lo = t * tile, len = min((size_t)tile, n - lo);
        for (int i = 1; i < W; ++i) pk::copy16_block(recv[recv.peer_at(i)] + slot + me * n + lo, x + lo, len * sizeof(T));
        __syncthreads();
        if (threadIdx.x > 0 && threadIdx.x < W) pk::signal(flags, recv.peer_at(threadIdx.x), me * tiles + t, epoch);
      }
    },
    [&](int b, int nb) {
      for (size_t j = b; j < W * tiles; j += nb) {
        const int src = recv.peer_at(j % W);
        const size_t lo = (j / W) * tile, len = min((size_t)tile, n - lo);
        if (src == me) {
          pk::copy16_block(out + me * n + lo, x + lo, len * sizeof(T));
        } else {
          if (threadIdx.x == 0) pk::wait(flags, src * tiles + j / W, epoch, "all-gather tile");
          __syncthreads();
          pk::copy16_block(out + src * n + lo, recv.local() + slot + src * n + lo, len * sizeof(T));
        }
      }
    });
  ep.done();
}

extern "C" __global__ void __launch_bounds__(512) all_gather_reg(const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> recv,
    pk::pbuf<uint32_t> flags, size_t n, unsigned tile, uint32_t* epochs, int senders) {
  all_gather<false>(x, out, recv, flags, n, tile, epochs, senders);
}
extern "C" __global__ void __launch_bounds__(512) all_gather_tma(const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> recv,
    pk::pbuf<uint32_t> flags, size_t n, unsigned tile, uint32_t* epochs, int senders) {
  all_gather<true>(x, out, recv, flags, n, tile, epochs, senders);
}
"""

MECHANISM = os.environ.get("PK_ALL_GATHER", "reg")  # "reg" or "tma"
_STATE: dict = {}


def _setup(n: int, mechanism: str, tile_bytes: int) -> Launch:
    rank, w = world()
    tile, senders, receivers = plan(2 * n, max_senders=32, max_receivers=96, tile=tile_bytes)
    tile //= 2
    tiles = -(-n // tile)
    # one receive buffer and one flags buffer per launch configuration (epoch sequence)
    recv = kl.symm_buffer((2, w, n), torch.bfloat16, tag=f"all_gather:{mechanism}:{tile}")
    flags = kl.flags(w * tiles, tag=f"all_gather:{n}:{mechanism}:{tile}")
    smem = STAGES * (CHUNK + 8) if mechanism == "tma" else 0  # the stages, then an mbarrier each
    if mechanism == "tma" and (smem > 227 * 1024 or STAGES < 1 or CHUNK < 1024):
        raise ValueError(f"all_gather: TMA ring of {STAGES} x {CHUNK} bytes does not fit in shared memory")
    launch = Launch(
        SOURCE,
        f"all_gather_{mechanism}",
        [recv.pbuf(), flags.pbuf(), ctypes.c_uint64(n), ctypes.c_uint32(tile)],
        [ctypes.c_int32(senders)],
        senders + receivers,
        512,
        smem,
        module="all_gather",
        build_flags=(f"-DSTAGES={STAGES}", f"-DCHUNK_KIB={CHUNK // 1024}"),
    )
    return launch


def solution(x: torch.Tensor, mechanism: str | None = None, tile_kib: int | None = None) -> torch.Tensor:
    """mechanism: "reg" or "tma" (default PK_ALL_GATHER); tile_kib: the tile (default PK_AG_TILE_KIB)."""
    x = check_input(x, 8)
    mech = mechanism or MECHANISM
    if mech not in ("reg", "tma"):
        raise ValueError(f"all_gather: mechanism {mech!r}, expected 'reg' or 'tma'")
    key = (x.numel(), mech, TILE if tile_kib is None else tile_kib * 1024)
    launch = _STATE.get(key) or _STATE.setdefault(key, _setup(*key))
    rank, w = world()
    out = torch.empty(w * x.numel(), dtype=x.dtype, device=x.device)
    launch(x, out)
    return out
