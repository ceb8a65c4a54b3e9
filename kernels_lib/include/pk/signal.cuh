// Signal, wait and barrier across GPUs on 32-bit flags in symmetric memory.
//
// Flags carry epochs: a kernel launched for the k-th time stores k (never resets), and a wait
// returns once the flag is >= k (compared modulo 2^32), so no flag needs clearing between
// launches. The epoch comes from device memory (pk::block_epoch below), never from the host per
// call, so that a CUDA graph of launches stays correct when replayed. signal is a system-scope
// release store; wait spins with system-scope acquire loads.
// A block's data becomes visible with its signal when the block synchronizes first:
//     ...stores to the peer...;  __syncthreads();  if (threadIdx.x == 0) pk::signal(f, p, i, k);
//     if (threadIdx.x == 0) pk::wait(f, i, k, "what");  __syncthreads();  ...read...
// Every wait has a deadline (PK_WAIT_TIMEOUT_NS, default 10 s; 0 disables it): past it, the
// wait prints the flag's name, index, rank, expected and seen values, then traps, so that a
// deadlock ends the kernel with an error (cudaErrorLaunchFailure) instead of hanging.
#pragma once
#include <cstdint>
#include <cstdio>
#include "pbuf.cuh"

#ifndef PK_WAIT_TIMEOUT_NS
#define PK_WAIT_TIMEOUT_NS 10000000000ull
#endif

namespace pk {

__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void add_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Store v into *flag (any rank's address) with release at system scope, after a system fence.
__device__ __forceinline__ void put_flag(uint32_t* flag, uint32_t v) {
  __threadfence_system();
  st_release_sys(flag, v);
}
// Add v to *flag (any rank's address) with release at system scope: for counters that several
// writers bump (e.g. "k tiles arrived").
__device__ __forceinline__ void add_flag(uint32_t* flag, uint32_t v) {
  __threadfence_system();
  add_release_sys(flag, v);
}

__device__ __forceinline__ uint32_t ld_relaxed_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Spin until *flag >= v (mod 2^32), then acquire (system scope). Polls with relaxed loads and
// fences once at the end, so that many waiting blocks do not slow the traffic they wait for.
// Traps after timeout_ns (0: never) with a message naming the flag, rank and values.
inline __device__ __noinline__ void wait_flag(const uint32_t* flag, uint32_t v, int rank, const char* what,
                                              uint64_t timeout_ns = PK_WAIT_TIMEOUT_NS) {
  uint32_t seen = ld_relaxed_sys(flag);
  if (static_cast<int32_t>(seen - v) < 0) {
    const uint64_t start = timeout_ns ? globaltimer_ns() : 0;
    for (uint32_t n = 1;; ++n) {
      seen = ld_relaxed_sys(flag);
      if (static_cast<int32_t>(seen - v) >= 0) break;
      if (timeout_ns && (n & 255) == 0 && globaltimer_ns() - start > timeout_ns) {
        printf("pk: wait timed out: %s (flag %p) on rank %d, block %d thread %d: expected >= %u, saw %u after %llu ns\n",
               what, flag, rank, blockIdx.x, threadIdx.x, v, seen, (unsigned long long)timeout_ns);
        __trap();
      }
    }
  }
  asm volatile("fence.acq_rel.sys;" ::: "memory");  // relaxed read + fence = acquire
}

// The epoch of this launch, from a per-block launch counter in device memory (CUDA-graph safe:
// a replayed launch reads the count the previous launch left). `counters` is a zeroed array of
// one uint32 per block of the grid owned by one launch configuration (this kernel, its flags
// and buffers, its grid). Block b's k-th launch reads k - 1, uses epoch k and, at its end,
// stores k. Every block of every rank runs every launch, so all blocks of all ranks agree on k.
//     const pk::block_epoch ep(counters);   // ep.value = 1, 2, 3 ... (wraps modulo 2^32)
//     ... signals and waits with ep.value, receive slot ep.value & 1 ...
//     ep.done();                            // every thread of the block, once, at the very end
// done() contains a __syncthreads: no thread may return early or skip it.
struct block_epoch {
  uint32_t* counter;
  uint32_t value;
  __device__ __forceinline__ explicit block_epoch(uint32_t* counters)
      : counter(counters + blockIdx.x), value(counters[blockIdx.x] + 1u) {}
  __device__ __forceinline__ void done() const {
    __syncthreads();  // every thread has read the old count (and finished its work)
    if (threadIdx.x == 0) *counter = value;
  }
};

// signal / wait on a flags buffer: signal stores v into rank `to`'s flag i; wait spins on this
// rank's flag i.
__device__ __forceinline__ void signal(const pbuf<uint32_t>& f, int to, size_t i, uint32_t v) { put_flag(f[to] + i, v); }
__device__ __forceinline__ void wait(const pbuf<uint32_t>& f, size_t i, uint32_t v, const char* what = "flag",
                                     uint64_t timeout_ns = PK_WAIT_TIMEOUT_NS) {
  wait_flag(f.local() + i, v, f.rank, what, timeout_ns);
}

// Barrier of all ranks, by one thread per rank (call it from one thread, e.g. thread 0 of block
// 0, between __syncthreads / grid-level ordering of your own). Uses flags [base, base + world):
// each rank stores epoch into every peer's flag base + rank, then waits for its own base + r.
__device__ __forceinline__ void barrier(const pbuf<uint32_t>& f, size_t base, uint32_t epoch) {
  for (int i = 1; i < f.world; ++i) signal(f, f.peer_at(i), base + f.rank, epoch);
  for (int i = 1; i < f.world; ++i) wait(f, base + f.peer_at(i), epoch, "barrier");
}

// The same for a whole block: every thread's prior writes are visible to every rank after it.
__device__ __forceinline__ void barrier_block(const pbuf<uint32_t>& f, size_t base, uint32_t epoch) {
  __syncthreads();
  if (threadIdx.x == 0) barrier(f, base, epoch);
  __syncthreads();
}

}  // namespace pk
