// pk::pbuf<T>: one symmetric buffer as seen from every rank, passed to a kernel by value.
//
// ptr[r] is rank r's copy of the buffer mapped into this process (peer memory over NVLink
// through unified addressing); ptr[rank] is this rank's own. mc is the multicast address of
// the buffer, or null where there is none. Layout (80 bytes, checked by the Python side):
//   uint64 ptr[PK_MAX_RANKS] | uint64 mc | int32 rank | int32 world
#pragma once
#include <cstddef>
#include <cstdint>

#ifndef PK_MAX_RANKS
#define PK_MAX_RANKS 8
#endif

namespace pk {

template <typename T>
struct pbuf {
  T* ptr[PK_MAX_RANKS];
  T* mc;
  int rank;
  int world;

  __host__ __device__ __forceinline__ T* local() const { return ptr[rank]; }
  __host__ __device__ __forceinline__ T* operator[](int r) const { return ptr[r]; }
  // The i-th rank after this one, cyclically (i = 0: this rank). Visiting peers in this order
  // spreads the traffic: at each step every rank talks to a different peer.
  __host__ __device__ __forceinline__ int peer_at(int i) const { return (rank + i) % world; }
};

static_assert(sizeof(pbuf<int>) == 8 * PK_MAX_RANKS + 16, "pbuf layout must match kernels_lib.PBuf");
static_assert(offsetof(pbuf<int>, mc) == 8 * PK_MAX_RANKS, "pbuf layout must match kernels_lib.PBuf");
static_assert(offsetof(pbuf<int>, rank) == 8 * PK_MAX_RANKS + 8, "pbuf layout must match kernels_lib.PBuf");

}  // namespace pk
