"""Reduce-scatter (sum): rank p owns chunk p of n elements; out = the sum over ranks of their x[p].
Two mechanisms (PK_REDUCE_SCATTER or the `mechanism` argument):

"add", the reduction at the destination: owner blocks set this rank's accumulator
(symmetric memory) to its own slice x[me], tile by tile, and signal each tile to every peer;
sender blocks (one thread each, TMA) wait for the owner's tile, load x[p]'s tile into shared
memory and TMA-store-add it into owner p's accumulator (bf16 adds done at the destination,
atomic per element, so W - 1 peers may add at once), then signal; owner blocks copy each tile
to out once every peer's add has landed. No SM reads the received data. Bytes per rank: link
(W-1) * n (the minimum); HBM: x read once, accumulator written once and read once by the
owner, read-added once per peer at the destination (mostly in L2), out written once.

"reg" (default): sender blocks push x[p] into rank p's receive buffer with 16-byte stores, tile by tile
with a flag each; reducer blocks sum this rank's own slice with the peers' copies as each tile
lands (pk::split_grid). Link (W-1) * n; HBM: x read once, the W - 1 received copies written
by the link and read once, out written once.
Candidate for eval/problems/reduce_scatter.py."""

import ctypes
import os

import torch

import kernels_lib as kl
from kernels_lib.examples._common import Launch, check_input, plan, world

STAGES, CHUNK = 4, 32 * 1024  # TMA ring of the "add" senders: 4 stages of 32 KiB

SOURCE = r"""
#include <pk/pk.cuh>
using T = __nv_bfloat16;
constexpr int STAGES = 4;
constexpr unsigned CHUNK = 32 * 1024;

// x: [world][n]; recv: [2 parities][world][n] per rank; flags: [world][tiles];
// epochs: one launch counter per block (pk::block_epoch).
extern "C" __global__ void __launch_bounds__(512) reduce_scatter(
    const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> recv, pk::pbuf<uint32_t> flags,
    size_t n, unsigned tile, uint32_t* epochs, int senders) {
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  const int me = recv.rank, W = recv.world;
  const size_t tiles = (n + tile - 1) / tile, slot = (size_t)(epoch & 1) * W * n;
  pk::split_grid(senders,
    [&](int b, int nb) {  // senders: x[p] -> p's recv[me]
      for (size_t t = b; t < tiles; t += nb) {
        const size_t lo = t * tile, len = min((size_t)tile, n - lo);
        for (int i = 1; i < W; ++i) {
          const int p = recv.peer_at(i);
          pk::copy16_block(recv[p] + slot + me * n + lo, x + p * n + lo, len * sizeof(T));
        }
        __syncthreads();
        if (threadIdx.x > 0 && threadIdx.x < W) pk::signal(flags, recv.peer_at(threadIdx.x), me * tiles + t, epoch);
      }
    },
    [&](int b, int nb) {  // reducers: out = x[me] + the peers' parts
      const T* r = recv.local() + slot;
      for (size_t t = b; t < tiles; t += nb) {
        const size_t lo = t * tile, len = min((size_t)tile, n - lo);
        if (threadIdx.x > 0 && threadIdx.x < W) pk::wait(flags, recv.peer_at(threadIdx.x) * tiles + t, epoch, "reduce-scatter tile");
        __syncthreads();
        for (size_t v = threadIdx.x * 8; v < len; v += blockDim.x * 8) {
          pk::acc16<T> a(pk::ld16(x + me * n + lo + v));
          for (int p = 0; p < W; ++p)
            if (p != me) a.add(pk::ld16_l2(r + p * n + lo + v));
          pk::st16(out + lo + v, a.get());
        }
      }
    });
  ep.done();
}

// x: [world][n]; acc: [n] per rank, one slot: every add into it waits for this launch's init of
// its tile. flags: [2][world][tiles]: [0][p][t] (at a sender) owner p has set tile t of its acc;
// [1][q][t] (at the owner) q's add into tile t has landed. Blocks [0, owners) own, the rest send.
extern "C" __global__ void __launch_bounds__(512) reduce_scatter_add(
    const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> acc, pk::pbuf<uint32_t> flags,
    size_t n, unsigned tile, uint32_t* epochs, int owners) {
  extern __shared__ __align__(128) unsigned char smem[];
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  const int me = acc.rank, W = acc.world, b = blockIdx.x;
  const size_t tiles = (n + tile - 1) / tile;
  if (b < owners) {
    T* a = acc.local();
    for (size_t t = b; t < tiles; t += owners) {  // 1. acc = my own slice, then tell every peer
      const size_t lo = t * tile, len = min((size_t)tile, n - lo);
      pk::copy16_block(a + lo, x + me * n + lo, len * sizeof(T));
      __syncthreads();
      if (threadIdx.x > 0 && threadIdx.x < W) pk::signal(flags, acc.peer_at(threadIdx.x), me * tiles + t, epoch);
    }
    for (size_t t = b; t < tiles; t += owners) {  // 2. out = acc, once every peer's add has landed
      const size_t lo = t * tile, len = min((size_t)tile, n - lo);
      if (threadIdx.x > 0 && threadIdx.x < W)
        pk::wait(flags, (W + acc.peer_at(threadIdx.x)) * tiles + t, epoch, "reduce-scatter adds");
      __syncthreads();
      pk::copy16_block(out + lo, a + lo, len * sizeof(T));
    }
  } else if (threadIdx.x == 0) {  // senders, one thread each: p's acc tile += my x[p] tile
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + STAGES * CHUNK);
    for (int s = 0; s < STAGES; ++s) pk::tma::bar_init(&bars[s]);
    uint32_t k = 0;  // chunks issued by this thread: stage k % STAGES, its phase (k / STAGES) & 1
    for (size_t j = b - owners; j < (W - 1) * tiles; j += gridDim.x - owners) {
      const int p = acc.peer_at(1 + j % (W - 1));
      const size_t t = j / (W - 1), lo = t * tile;
      const unsigned bytes = min((size_t)tile, n - lo) * sizeof(T);
      const char* src = reinterpret_cast<const char*>(x + p * n + lo);
      char* dst = reinterpret_cast<char*>(acc[p] + lo);
      pk::wait(flags, p * tiles + t, epoch, "reduce-scatter init");
      pk::tma::fence_global();  // the owner's init (seen through the wait) before my adds
      for (unsigned off = 0; off < bytes; off += CHUNK, ++k) {
        const int s = k % STAGES;
        const unsigned len = min(CHUNK, bytes - off);
        if (k >= STAGES) pk::tma::wait_read<STAGES - 1>();  // the add that read stage s is done
        pk::tma::bar_expect(&bars[s], len);
        pk::tma::load(smem + s * CHUNK, src + off, len, &bars[s]);
        pk::tma::bar_wait(&bars[s], (k / STAGES) & 1);
        pk::tma::store_add(reinterpret_cast<T*>(dst + off), reinterpret_cast<const T*>(smem + s * CHUNK), len);
        pk::tma::commit();
      }
      pk::tma::wait_writes();  // the adds have landed before the flag
      pk::signal(flags, p, (W + me) * tiles + t, epoch);
    }
  }
  ep.done();
}
"""

# "reg" by default: on two H200s (2026-12-01) it moved 64 MiB at 279 GB/s against 240 for "add"
# (14.5 against 20.9 us at 1 MiB): docs/kernels_lib_bench.md.
MECHANISM = os.environ.get("PK_REDUCE_SCATTER", "reg")  # "reg" or "add"
_STATE: dict = {}


def _setup(n: int, mechanism: str) -> Launch:
    rank, w = world()
    tile, senders, receivers = plan(2 * n, max_senders=32, max_receivers=96)  # measured: 32 senders fill the link
    tile //= 2
    tiles = -(-n // tile)
    flags = kl.flags(2 * w * tiles, tag=f"reduce_scatter:{n}:{mechanism}")
    if mechanism == "reg":
        recv = kl.symm_buffer((2, w, n), torch.bfloat16, tag="reduce_scatter")
        args = [recv.pbuf(), flags.pbuf(), ctypes.c_uint64(n), ctypes.c_uint32(tile)]
        return Launch(
            SOURCE, "reduce_scatter", args, [ctypes.c_int32(senders)], senders + receivers, 512, module="reduce_scatter"
        )
    senders = senders if w > 1 else 0
    if senders + receivers > 132:  # every block resident at once: the owners wait for the peers' senders
        raise ValueError(f"reduce_scatter: {senders}+{receivers} blocks; at most 132 can all be resident")
    acc = kl.symm_buffer((n,), torch.bfloat16, tag="reduce_scatter:add")
    args = [acc.pbuf(), flags.pbuf(), ctypes.c_uint64(n), ctypes.c_uint32(tile)]
    smem = STAGES * CHUNK + 64
    return Launch(
        SOURCE, "reduce_scatter_add", args, [ctypes.c_int32(receivers)], receivers + senders, 512, smem, "reduce_scatter"
    )


def solution(x: torch.Tensor, mechanism: str | None = None) -> torch.Tensor:
    rank, w = world()
    x = check_input(x, 8 * w)
    n = x.numel() // w
    mech = mechanism or MECHANISM
    if mech not in ("add", "reg"):
        raise ValueError(f"reduce_scatter: mechanism {mech!r}, expected 'add' or 'reg'")
    launch = _STATE.get((n, mech)) or _STATE.setdefault((n, mech), _setup(n, mech))
    out = torch.empty(n, dtype=x.dtype, device=x.device)
    launch(x, out)
    return out
