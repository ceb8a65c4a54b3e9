"""All-reduce (sum), two shots, pipelined over three roles of SMs: rank r owns chunk r of n/W
elements. Sender blocks push this rank's part of every peer's chunk into that peer's buffer,
tile by tile, a flag per tile (reduce-scatter traffic; they never wait). Reducer blocks take a
tile of this rank's own chunk as soon as every peer's part of it has landed, sum it with this
rank's own part, write it to out and push the sum to every peer, a flag per tile (all-gather
traffic). Gatherer blocks copy each peer's summed tile into out as its flag arrives. The roles
run at once (blocks [0, S) send, [S, S + R) reduce, the rest gather), so the link carries the
scatter while tiles are being reduced and never waits for a reduction.
Link bytes per rank: 2 (W-1)/W * n, the minimum without in-network reduction (better than one
shot for W > 2). HBM per rank: x read once, the (W-1) parts read once, out written once, the
(W-1) peers' sums read once more by the gatherers. Candidate for eval/problems/all_reduce.py."""

import ctypes
import os

import torch

import kernels_lib as kl
from kernels_lib.examples._common import Launch, check_input, plan, world

SOURCE = r"""
#include <pk/pk.cuh>
using T = __nv_bfloat16;
// buf: [2 parities][2 steps][world][chunk] per rank: step 0 holds the peers' parts of my chunk,
// step 1 the peers' summed chunks. flags: [2 steps][world][tiles]; epochs: one launch counter
// per block (pk::block_epoch). Every block must be resident (grid <= number of SMs): reducers
// wait for the peers' senders, gatherers for the peers' reducers.
extern "C" __global__ void __launch_bounds__(512) all_reduce_two_shot(
    const T* __restrict__ x, T* __restrict__ out, pk::pbuf<T> buf, pk::pbuf<uint32_t> flags,
    size_t n, unsigned tile, uint32_t* epochs, int senders, int reducers) {
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  const int me = buf.rank, W = buf.world, b = blockIdx.x;
  const size_t c = n / W, tiles = (c + tile - 1) / tile, slot = (size_t)(epoch & 1) * 2 * W * c;
  if (b < senders) {  // 1. scatter: my part of chunk p -> p's parts[me]; items tile-major over the peers
    for (size_t j = b; j < (W - 1) * tiles; j += senders) {
      const int p = buf.peer_at(1 + j % (W - 1));
      const size_t t = j / (W - 1), lo = t * tile, len = min((size_t)tile, c - lo);
      pk::copy16_block(buf[p] + slot + me * c + lo, x + p * c + lo, len * sizeof(T));
      __syncthreads();
      if (threadIdx.x == 0) pk::signal(flags, p, me * tiles + t, epoch);
    }
  } else if (b < senders + reducers) {  // 2. reduce a tile of my chunk as its parts land; push the sum
    const T* parts = buf.local() + slot;
    for (size_t t = b - senders; t < tiles; t += reducers) {
      const size_t lo = t * tile, len = min((size_t)tile, c - lo);
      if (threadIdx.x > 0 && threadIdx.x < W) pk::wait(flags, buf.peer_at(threadIdx.x) * tiles + t, epoch, "two-shot part");
      __syncthreads();
      for (size_t v = threadIdx.x * 8; v < len; v += blockDim.x * 8) {
        pk::acc16<T> a(pk::ld16(x + me * c + lo + v));
        for (int q = 0; q < W; ++q)
          if (q != me) a.add(pk::ld16_l2(parts + q * c + lo + v));
        const pk::v16 s = a.get();
        pk::st16(out + me * c + lo + v, s);
        for (int i = 1; i < W; ++i) pk::st16(buf[buf.peer_at(i)] + slot + (W + me) * c + lo + v, s);
      }
      __syncthreads();
      if (threadIdx.x > 0 && threadIdx.x < W) pk::signal(flags, buf.peer_at(threadIdx.x), (W + me) * tiles + t, epoch);
    }
  } else {  // 3. gather: peer q's summed tile -> out, as it lands
    const int g = b - senders - reducers, ng = gridDim.x - senders - reducers;
    for (size_t j = g; j < (W - 1) * tiles; j += ng) {
      const int q = buf.peer_at(1 + j % (W - 1));
      const size_t t = j / (W - 1), lo = t * tile, len = min((size_t)tile, c - lo);
      if (threadIdx.x == 0) pk::wait(flags, (W + q) * tiles + t, epoch, "two-shot sum");
      __syncthreads();
      pk::copy16_block(out + q * c + lo, buf.local() + slot + (W + q) * c + lo, len * sizeof(T));
    }
  }
  ep.done();
}
"""

MAX_BLOCKS = 132  # every block resident at once (H100/H200): the waits need it

_STATE: dict = {}


def roles(c: int, w: int) -> tuple[int, int, int, int]:
    """(tile elements, senders, reducers, gatherers) for chunks of c bf16 elements. Caps 32, 64
    and 32 blocks; PK_MAX_SENDERS, PK_MAX_RECEIVERS (reducers) and PK_MAX_GATHERERS override
    them for sweeps. One rank alone needs only reducers."""
    tile, senders, reducers = plan(2 * c, max_senders=32, max_receivers=64)
    tile //= 2
    tiles = -(-c // tile)
    gatherers = min((w - 1) * tiles, int(os.environ.get("PK_MAX_GATHERERS", 32)))
    if w == 1:
        senders = 0
    if senders + reducers + gatherers > MAX_BLOCKS:
        raise ValueError(f"two-shot: {senders}+{reducers}+{gatherers} blocks; at most {MAX_BLOCKS} can all be resident")
    return tile, senders, reducers, gatherers


def _setup(n: int) -> Launch:
    rank, w = world()
    c = n // w
    tile, senders, reducers, gatherers = roles(c, w)
    tiles = -(-c // tile)
    buf = kl.symm_buffer((2, 2, w, c), torch.bfloat16, tag="all_reduce_two_shot")
    flags = kl.flags(2 * w * tiles, tag=f"all_reduce_two_shot:{n}")
    return Launch(
        SOURCE,
        "all_reduce_two_shot",
        [buf.pbuf(), flags.pbuf(), ctypes.c_uint64(n), ctypes.c_uint32(tile)],
        [ctypes.c_int32(senders), ctypes.c_int32(reducers)],
        senders + reducers + gatherers,
        512,
    )


def solution(x: torch.Tensor) -> torch.Tensor:
    rank, w = world()
    x = check_input(x, 8 * w)
    out = torch.empty_like(x)
    if x.numel():
        launch = _STATE.get(x.numel()) or _STATE.setdefault(x.numel(), _setup(x.numel()))
        launch(x, out)
    return out
