// Programmatic dependent launch (PDL, sm_90 and newer), device side. A kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it in the
// stream is still running: as soon as every block of that kernel has executed
// pdl_launch_dependents() (or exited). Its blocks may then do anything that does not depend on
// the previous kernel (load weights) and must call pdl_wait() before they read what the previous
// kernel wrote or write what it reads: griddepcontrol.wait returns once every prerequisite grid
// has completed and its memory operations are visible. Both are no-ops in a kernel launched
// without the attribute, and compile to nothing below sm_90.
#pragma once

#include <cstdint>

namespace hymoe::gpu::kernels {

// Bytes a block may ask L2 for before its pdl_wait() (Fp8GemvParams::pdl_prefetch_l2): bounded so
// that the resident blocks' prefetches stay far below L2's size.
inline constexpr int kPdlPrefetchBlockBytes = 32768;

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// A load of data that the previous kernel may have written (a 16-byte uint4 of activations, a
// float scale: any type __ldca / __ldg take): through the read-only (.nc) path in a plain launch,
// through the ordinary cached path (ld.global.ca) in a PDL launch, since the .nc path is defined
// only for data no one writes during the kernel's lifetime and a PDL kernel's lifetime overlaps
// the previous kernel's. Only after pdl_wait().
template <bool kPdl, typename T>
__device__ __forceinline__ T load_dependent(const T* p) {
  if constexpr (kPdl) {
    return __ldca(p);
  } else {
    return __ldg(p);
  }
}

// Asks L2 to fetch [p, p + bytes) (bytes a multiple of 16, p 16-byte aligned) without waiting:
// cp.async.bulk.prefetch.L2 (sm_90 and newer; nothing below).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

}  // namespace hymoe::gpu::kernels
