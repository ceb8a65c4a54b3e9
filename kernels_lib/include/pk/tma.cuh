// TMA bulk copies between shared memory and global memory (this GPU's or a peer's), sm_90.
//
// One thread issues a copy of up to (2^20 - 16) bytes; the copy engine of the SM moves it
// while the threads go on. Sizes are multiples of 16 bytes, addresses 16-byte aligned.
//   load : global (local or peer) -> shared, completes on an mbarrier (expect_tx + wait)
//   store: shared -> global (local or peer), completes per bulk group (commit + wait_group)
//   store_add: shared -> global with element-wise add at the destination (bf16, f16, f32),
//          i.e. a reduction into a peer's buffer with no read back over the link
// Few SMs saturate a link this way (about 15 on H100 NVSwitch systems): it frees the others.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace pk {
namespace tma {

__device__ __forceinline__ uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// mbarrier in shared memory (a uint64_t, 8-byte aligned). init by one thread, then __syncthreads.
__device__ __forceinline__ void bar_init(uint64_t* bar, uint32_t arrivals = 1) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(bar)), "r"(arrivals) : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // visible to the copy engine
}
// Arrive on the barrier and announce that `bytes` will land on it (one thread, once per phase).
__device__ __forceinline__ void bar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem(bar)), "r"(bytes) : "memory");
}
// Wait for the phase with parity `phase` (0, 1, 0, ...) to complete.
__device__ __forceinline__ void bar_wait(uint64_t* bar, uint32_t phase) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "wait_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n}" ::"r"(smem(bar)),
      "r"(phase)
      : "memory");
}

// global (any rank's address) -> shared; completes on bar (call bar_expect with the bytes first).
__device__ __forceinline__ void load(void* dst_smem, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem(dst_smem)),
               "l"(src), "r"(bytes), "r"(smem(bar))
               : "memory");
}
// shared -> global (any rank's address), in the current bulk group.
__device__ __forceinline__ void store(void* dst, const void* src_smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem(src_smem)), "r"(bytes) : "memory");
}
// shared -> global with dst[i] += src[i] done at the destination, in the current bulk group.
template <typename T> __device__ __forceinline__ void store_add(T* dst, const T* src_smem, uint32_t bytes);
template <> __device__ __forceinline__ void store_add<float>(float* dst, const float* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst), "r"(smem(src)), "r"(bytes)
               : "memory");
}
template <> __device__ __forceinline__ void store_add<__nv_bfloat16>(__nv_bfloat16* dst, const __nv_bfloat16* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%0], [%1], %2;" ::"l"(dst), "r"(smem(src)),
               "r"(bytes)
               : "memory");
}
template <> __device__ __forceinline__ void store_add<__half>(__half* dst, const __half* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [%0], [%1], %2;" ::"l"(dst), "r"(smem(src)), "r"(bytes)
               : "memory");
}

// Close the current bulk group of stores.
__device__ __forceinline__ void commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most N groups still read their shared memory (the buffers of the others are free).
template <int N> __device__ __forceinline__ void wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory"); }
// Wait until all groups have completed their writes, and order them before this thread's later
// generic accesses (e.g. the release store of pk::signal): call before signalling a peer.
__device__ __forceinline__ void wait_writes() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
// Order this thread's earlier generic accesses to global memory (e.g. a wait's acquire) before
// its later bulk copies: call between a wait and a load of what the peer wrote.
__device__ __forceinline__ void fence_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
// Order the block's ordinary stores to shared memory before bulk copies that read it (each
// writing thread, then __syncthreads).
__device__ __forceinline__ void fence_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

}  // namespace tma
}  // namespace pk
