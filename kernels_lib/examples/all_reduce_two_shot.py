"""All-reduce (sum), two shots: rank r owns chunk r of n/W elements. Scatter: every rank pushes
its part of chunk p to rank p; reduce: p sums its chunk, keeps it and pushes the sum to every
peer; gather: every rank copies the peers' sums into place. Each block runs the three steps on
its own tiles, with per-tile flags, so tiles of different blocks overlap the steps.
Link bytes per rank: 2 (W-1)/W * n, the minimum without in-network reduction (better than
one shot for W > 2). Candidate for eval/problems/all_reduce.py."""

import ctypes

import torch

import kernels_lib as kl
from kernels_lib.examples._common import Launch, check_input, plan, world

SOURCE = r"""
#include <pk/pk.cuh>
using T = __nv_bfloat16;
// buf: [2 parities][2 steps][world][chunk] per rank: step 0 holds the peers' parts of my chunk,
// step 1 the peers' reduced chunks. flags: [2 steps][world][tiles].
extern "C" __global__ void __launch_bounds__(512) all_reduce_two_shot(
    const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> buf, pk::pbuf<uint32_t> flags,
    size_t n, unsigned tile, uint32_t* epochs) {
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  const int me = buf.rank, W = buf.world, peer = threadIdx.x > 0 && threadIdx.x < W ? buf.peer_at(threadIdx.x) : -1;
  const size_t c = n / W, tiles = (c + tile - 1) / tile, slot = (size_t)(epoch & 1) * 2 * W * c;
  const T* parts = buf.local() + slot;  // [world][chunk]
  const T* sums = parts + W * c;        // [world][chunk]
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const size_t lo = t * tile, len = min((size_t)tile, c - lo);
    for (int i = 1; i < W; ++i) {  // 1. scatter: my part of chunk p -> p's parts[me]
      const int p = buf.peer_at(i);
      pk::copy16_block(buf[p] + slot + me * c + lo, x + p * c + lo, len * sizeof(T));
    }
    __syncthreads();
    if (peer >= 0) pk::signal(flags, peer, me * tiles + t, epoch);
    if (peer >= 0) pk::wait(flags, peer * tiles + t, epoch, "two-shot scatter");
    __syncthreads();
    for (size_t v = threadIdx.x * 8; v < len; v += blockDim.x * 8) {  // 2. reduce my chunk, push the sum
      pk::acc16<T> a(pk::ld16(x + me * c + lo + v));
      for (int p = 0; p < W; ++p)
        if (p != me) a.add(pk::ld16_l2(parts + p * c + lo + v));
      const pk::v16 s = a.get();
      pk::st16(out + me * c + lo + v, s);
      for (int i = 1; i < W; ++i) pk::st16(buf[buf.peer_at(i)] + slot + (W + me) * c + lo + v, s);
    }
    __syncthreads();
    if (peer >= 0) pk::signal(flags, peer, (W + me) * tiles + t, epoch);
    if (peer >= 0) pk::wait(flags, (W + peer) * tiles + t, epoch, "two-shot gather");
    __syncthreads();
    for (int i = 1; i < W; ++i) {  // 3. gather: the peers' sums -> out
      const int p = buf.peer_at(i);
      pk::copy16_block(out + p * c + lo, sums + p * c + lo, len * sizeof(T));
    }
  }
  ep.done();
}
"""

_STATE: dict = {}


def _setup(n: int) -> tuple:
    rank, w = world()
    c = n // w
    tile, senders, _ = plan(2 * c, max_senders=128)
    tile //= 2
    tiles = -(-c // tile)
    buf = kl.symm_buffer((2, 2, w, c), torch.bfloat16, tag="all_reduce_two_shot")
    flags = kl.flags(2 * w * tiles, tag=f"all_reduce_two_shot:{n}")
    launch = Launch(
        SOURCE, "all_reduce_two_shot", [buf.pbuf(), flags.pbuf(), ctypes.c_uint64(n), ctypes.c_uint32(tile)], [], senders, 512
    )
    return launch


def solution(x: torch.Tensor) -> torch.Tensor:
    rank, w = world()
    x = check_input(x, 8 * w)
    launch = _STATE.get(x.numel()) or _STATE.setdefault(x.numel(), _setup(x.numel()))
    out = torch.empty_like(x)
    launch(x, out)
    return out
