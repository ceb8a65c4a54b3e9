"""All-to-all: inside every block, sender warps push chunk p of x into rank p's receive buffer
tile by tile, each tile followed by a flag, while receiver warps of the same block copy the
peers' tiles into place as their flags arrive (pk::split_warps: intra-SM overlap; each role
synchronises on its own named barrier). Link bytes per rank: (W-1) * n, the minimum.
Candidate for eval/problems/all_to_all.py."""

import ctypes

import torch

import kernels_lib as kl
from kernels_lib.examples._common import Launch, check_input, plan, world

SEND_WARPS, WARPS = 8, 16

SOURCE = r"""
#include <pk/pk.cuh>
using T = __nv_bfloat16;
// x, out: [world][n]; recv: [2 parities][world][n] per rank; flags: [world][tiles];
// epochs: one launch counter per block (pk::block_epoch).
extern "C" __global__ void __launch_bounds__(512) all_to_all(
    const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> recv, pk::pbuf<uint32_t> flags,
    size_t n, unsigned tile, uint32_t* epochs, int send_warps) {
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  const int me = recv.rank, W = recv.world;
  const size_t tiles = (n + tile - 1) / tile, slot = (size_t)(epoch & 1) * W * n;
  pk::split_warps(send_warps,
    [&](int w, int nw) {  // sender warps: x[p] -> p's recv[me], one (peer, tile) at a time
      const unsigned tid = threadIdx.x, nt = nw * 32;
      for (size_t j = blockIdx.x; j < (W - 1) * tiles; j += gridDim.x) {
        const int p = recv.peer_at(1 + j % (W - 1));
        const size_t t = j / (W - 1), lo = t * tile, len = min((size_t)tile, n - lo);
        pk::copy16(recv[p] + slot + me * n + lo, x + p * n + lo, len * sizeof(T), tid, nt);
        pk::role_sync(1, nt);
        if (tid == 0) pk::signal(flags, p, me * tiles + t, epoch);
      }
    },
    [&](int w, int nw) {  // receiver warps: peers' tiles -> out[src], and x[me] -> out[me]
      const unsigned tid = threadIdx.x - send_warps * 32, nt = nw * 32;
      for (size_t j = blockIdx.x; j < W * tiles; j += gridDim.x) {
        const int src = recv.peer_at(j % W);
        const size_t t = j / W, lo = t * tile, len = min((size_t)tile, n - lo);
        if (src == me) {
          pk::copy16(out + me * n + lo, x + me * n + lo, len * sizeof(T), tid, nt);
        } else {
          if (tid == 0) pk::wait(flags, src * tiles + t, epoch, "all-to-all tile");
          pk::role_sync(2, nt);
          pk::copy16(out + src * n + lo, recv.local() + slot + src * n + lo, len * sizeof(T), tid, nt);
        }
      }
    });
  ep.done();  // both roles of the block
}
"""

_STATE: dict = {}


def _setup(n: int) -> Launch:
    rank, w = world()
    tile, _, _ = plan(2 * n)
    tile //= 2
    tiles = -(-n // tile)
    blocks = max(1, min(128, w * tiles))
    recv = kl.symm_buffer((2, w, n), torch.bfloat16, tag="all_to_all")
    flags = kl.flags(w * tiles, tag=f"all_to_all:{n}")
    launch = Launch(
        SOURCE,
        "all_to_all",
        [recv.pbuf(), flags.pbuf(), ctypes.c_uint64(n), ctypes.c_uint32(tile)],
        [ctypes.c_int32(SEND_WARPS)],
        blocks,
        WARPS * 32,
    )
    return launch


def solution(x: torch.Tensor) -> torch.Tensor:
    rank, w = world()
    x = check_input(x, 8 * w)
    n = x.numel() // w
    launch = _STATE.get(n) or _STATE.setdefault(n, _setup(n))
    out = torch.empty_like(x)
    launch(x, out)
    return out
