// 16-byte register-level loads and stores (local or peer memory) and element-wise sums.
//
// A thread moves 16 bytes per instruction; a warp moves 512 contiguous bytes. Stores to a
// peer's address travel over NVLink as posted writes (no round trip); loads from a peer wait
// for the reply, so keep several in flight (copy16_block does, four per thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace pk {

using v16 = uint4;  // 16 bytes: 8 bf16/half, 4 float

// Plain load/store: the L1 may hold the line. For data this kernel wrote or that never changes.
__device__ __forceinline__ v16 ld16(const void* p) { return *reinterpret_cast<const v16*>(p); }
__device__ __forceinline__ void st16(void* p, v16 v) { *reinterpret_cast<v16*>(p) = v; }
// Load that skips the L1: for data another GPU wrote during this kernel (after a wait).
__device__ __forceinline__ v16 ld16_l2(const void* p) { return __ldcg(reinterpret_cast<const v16*>(p)); }
// Streaming store (evict first): for data this GPU will not read again soon, e.g. to a peer.
__device__ __forceinline__ void st16_stream(void* p, v16 v) { __stcs(reinterpret_cast<v16*>(p), v); }

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half(x); }

// Sum of 16-byte vectors of T, accumulated in float: acc.add(v) ... acc.get().
template <typename T>
struct acc16 {
  static constexpr int N = 16 / sizeof(T);
  float f[N];
  __device__ __forceinline__ explicit acc16(v16 v) { set(v); }
  __device__ __forceinline__ void set(v16 v) {
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int i = 0; i < N; ++i) f[i] = to_f(e[i]);
  }
  __device__ __forceinline__ void add(v16 v) {
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int i = 0; i < N; ++i) f[i] += to_f(e[i]);
  }
  __device__ __forceinline__ v16 get() const {
    v16 r;
    T* e = reinterpret_cast<T*>(&r);
#pragma unroll
    for (int i = 0; i < N; ++i) e[i] = from_f<T>(f[i]);
    return r;
  }
};

// The sum over all ranks r < world of the 16-byte vector at byte offset off of ptr[r]
// (ptr[r] are the ranks' copies of one buffer, e.g. pbuf::ptr). All loads are issued first.
template <typename T, int MAX = 8>
__device__ __forceinline__ v16 sum16(T* const* ptr, int world, size_t off) {
  v16 v[MAX];
#pragma unroll
  for (int r = 0; r < MAX; ++r)
    if (r < world) v[r] = ld16_l2(reinterpret_cast<const char*>(ptr[r]) + off);
  acc16<T> a(v[0]);
#pragma unroll
  for (int r = 1; r < MAX; ++r)
    if (r < world) a.add(v[r]);
  return a.get();
}

// Cooperative copy of nbytes (a multiple of 16, both pointers 16-byte aligned) from src to dst
// by threads tid = 0..nthreads-1; either pointer may be a peer's address. Four loads are in
// flight per thread before the stores.
__device__ __forceinline__ void copy16(void* dst, const void* src, size_t nbytes, unsigned tid, unsigned nthreads) {
  const size_t n = nbytes / 16, step = nthreads;
  const v16* s = reinterpret_cast<const v16*>(src);
  v16* d = reinterpret_cast<v16*>(dst);
  size_t i = tid;
  for (; i + 3 * step < n; i += 4 * step) {
    v16 a = __ldcg(s + i), b = __ldcg(s + i + step), c = __ldcg(s + i + 2 * step), e = __ldcg(s + i + 3 * step);
    d[i] = a; d[i + step] = b; d[i + 2 * step] = c; d[i + 3 * step] = e;
  }
  for (; i < n; i += step) d[i] = __ldcg(s + i);
}
// The same by the whole block.
__device__ __forceinline__ void copy16_block(void* dst, const void* src, size_t nbytes) {
  copy16(dst, src, nbytes, threadIdx.x, blockDim.x);
}

}  // namespace pk
