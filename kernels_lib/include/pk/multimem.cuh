// NVSwitch multicast (multimem) on a pbuf's mc address: the switch reduces or broadcasts.
// Compiled everywhere, run only where kernels_lib.multimem.require() allows it (the host side
// refuses when the environment disables multicast or the device has none).
//   ld_reduce: the sum over all ranks of the 16 bytes at mc + off (one read, switch adds)
//   st       : store 16 bytes to every rank's copy at once
//   signal_all: release-add v to every rank's flag at once
#pragma once
#include <cstdint>

namespace pk {
namespace multimem {

__device__ __forceinline__ uint4 ld_reduce_bf16(const void* mc) {
  uint4 v;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.bf16x2 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(mc)
               : "memory");
  return v;
}
__device__ __forceinline__ uint4 ld_reduce_f32(const void* mc) {
  uint4 v;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(mc)
               : "memory");
  return v;
}
__device__ __forceinline__ void st(void* mc, uint4 v) {
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(mc), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void signal_all(uint32_t* mc_flag, uint32_t v) {
  __threadfence_system();
  asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" ::"l"(mc_flag), "r"(v) : "memory");
}

}  // namespace multimem
}  // namespace pk
