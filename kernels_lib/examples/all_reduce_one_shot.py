"""All-reduce (sum), one shot: every rank pushes its whole tensor into every peer's receive
buffer with 16-byte stores over NVLink, signalling each tile; reducer SMs sum each tile as soon
as every peer's copy of it has landed (pk::split_grid: senders and reducers run at once).
Link bytes per rank: (W-1) * n, the minimum for W = 2; no extra copy of the input.
Candidate for eval/problems/all_reduce.py."""

import ctypes

import torch

import kernels_lib as kl
from kernels_lib.examples._common import Launch, check_input, plan, world

SOURCE = r"""
#include <pk/pk.cuh>
using T = __nv_bfloat16;
// recv: [2 parities][world][n] per rank (parity = epoch & 1, so a launch never overwrites what
// the peer may still read from the launch before); flags: [world][tiles] per rank;
// epochs: one launch counter per block (pk::block_epoch).
extern "C" __global__ void __launch_bounds__(512) all_reduce_one_shot(
    const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> recv, pk::pbuf<uint32_t> flags,
    size_t n, unsigned tile, uint32_t* epochs, int senders) {
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  const int me = recv.rank, W = recv.world;
  const size_t tiles = (n + tile - 1) / tile, slot = (size_t)(epoch & 1) * W * n;
  pk::split_grid(senders,
    [&](int b, int nb) {  // senders: x -> recv[me] of every peer, then a flag per tile
      for (size_t t = b; t < tiles; t += nb) {
        const size_t lo = t * tile, len = min((size_t)tile, n - lo);
        for (int i = 1; i < W; ++i) pk::copy16_block(recv[recv.peer_at(i)] + slot + me * n + lo, x + lo, len * sizeof(T));
        __syncthreads();
        if (threadIdx.x > 0 && threadIdx.x < W) pk::signal(flags, recv.peer_at(threadIdx.x), me * tiles + t, epoch);
      }
    },
    [&](int b, int nb) {  // reducers: out = x + the peers' copies, tile by tile as they land
      const T* r = recv.local() + slot;
      for (size_t t = b; t < tiles; t += nb) {
        const size_t lo = t * tile, len = min((size_t)tile, n - lo);
        if (threadIdx.x > 0 && threadIdx.x < W) pk::wait(flags, recv.peer_at(threadIdx.x) * tiles + t, epoch, "one-shot tile");
        __syncthreads();
        for (size_t v = threadIdx.x * 8; v < len; v += blockDim.x * 8) {
          pk::acc16<T> a(pk::ld16(x + lo + v));
          for (int p = 0; p < W; ++p)
            if (p != me) a.add(pk::ld16_l2(r + p * n + lo + v));
          pk::st16(out + lo + v, a.get());
        }
      }
    });
  ep.done();
}
"""

_STATE: dict = {}


def _setup(n: int) -> Launch:
    rank, w = world()
    tile, senders, reducers = plan(2 * n, max_senders=32, max_receivers=96)  # measured: 32 senders fill the link
    tile //= 2  # elements
    tiles = -(-n // tile)
    recv = kl.symm_buffer((2, w, n), torch.bfloat16, tag="all_reduce_one_shot")
    flags = kl.flags(w * tiles, tag=f"all_reduce_one_shot:{n}")
    launch = Launch(
        SOURCE,
        "all_reduce_one_shot",
        [recv.pbuf(), flags.pbuf(), ctypes.c_uint64(n), ctypes.c_uint32(tile)],
        [ctypes.c_int32(senders)],
        senders + reducers,
        512,
    )
    return launch


def solution(x: torch.Tensor) -> torch.Tensor:
    x = check_input(x, 8)
    launch = _STATE.get(x.numel()) or _STATE.setdefault(x.numel(), _setup(x.numel()))
    out = torch.empty_like(x)
    launch(x, out)
    return out
