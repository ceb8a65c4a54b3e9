// Splitting work between roles: whole SMs (inter-SM overlap) or warps inside an SM (intra-SM).
//
// split_grid: blocks [0, n_first) run first(i, n_first), the rest run second(i, n_second).
//   Put producers first (lower block indices start first), e.g. senders then receivers, or
//   compute blocks then a few communication blocks. Every block of the grid must be resident at
//   once when one role waits for another: keep gridDim.x <= the number of SMs (132 on H100/H200).
// split_warps: warps [0, n_first) of the block run first(w, n_first), the others second(w, n).
//   Synchronise inside one role with role_sync(id, threads_of_the_role), never __syncthreads.
#pragma once

namespace pk {

template <typename First, typename Second>
__device__ __forceinline__ void split_grid(int n_first, First first, Second second) {
  const int b = blockIdx.x;
  if (b < n_first) first(b, n_first);
  else second(b - n_first, static_cast<int>(gridDim.x) - n_first);
}

template <typename First, typename Second>
__device__ __forceinline__ void split_warps(int n_first, First first, Second second) {
  const int w = threadIdx.x / 32, nw = blockDim.x / 32;
  if (w < n_first) first(w, n_first);
  else second(w - n_first, nw - n_first);
}

// Named barrier id (1..15; 0 is __syncthreads) among `threads` threads (a multiple of 32).
__device__ __forceinline__ void role_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace pk
