// mbarriers and bulk copies (sm_90 and newer: the Hopper wgmma kernels and the GEMV streaming
// kernel, which runs on sm_120 too). Below sm_90 (and in the host pass) the bodies compile to a
// trap: the host launches their kernels only on compute capability 9.0 or newer.
//   bulk_copy_g2s(dst, src, bytes, bar)  one thread: cp.async.bulk of bytes (a multiple of 16,
//                         both addresses 16-byte aligned) from global src to shared dst, completing
//                         those bytes on bar (announced by mbarrier_arrive_expect_tx)
#pragma once

#include <cstdint>

namespace hymoe::gpu::kernels {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define HYMOE_MBARRIER_ENABLED 1
#endif

//   mbarrier_init(bar, count)   one thread, before a __syncthreads: count arrivals per phase
//   mbarrier_inval(bar)         one thread, after a __syncthreads that follows the last use:
//                               the barrier may then be initialised again (a new count, phase 0)
//   mbarrier_arrive             one arrival (release, CTA scope)
//   mbarrier_wait(bar, parity)  spins on try_wait.parity until the phase of that parity completed
//                               (acquire, CTA scope); wgmma_layout.h's RingPos says which parity;
//                               traps after kMbarrierTimeoutClocks (a deadlock fails the launch)
//   cp_async_arrive_noinc       an arrival on bar once every cp.async this thread issued so far
//                               landed (.noinc: it counts as one of the count of mbarrier_init)
//   cp_async_wait_all           waits for all of this thread's cp.async
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
#if defined(HYMOE_MBARRIER_ENABLED)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  (void)bar;
  (void)count;
  __trap();
#endif
}

__device__ __forceinline__ void mbarrier_inval(uint32_t bar) {
#if defined(HYMOE_MBARRIER_ENABLED)
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
  __trap();
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#if defined(HYMOE_MBARRIER_ENABLED)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
  __trap();
#endif
}

// A wait that has not completed after this many clocks (~2 s) is a protocol bug: trap (the launch
// fails with an error) rather than hang the process.
inline constexpr long long kMbarrierTimeoutClocks = 1ll << 32;

__device__ __forceinline__ bool mbarrier_try_wait(uint32_t bar, uint32_t parity) {
#if defined(HYMOE_MBARRIER_ENABLED)
  uint32_t done = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
#else
  (void)bar;
  (void)parity;
  __trap();
  return false;
#endif
}

__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#if defined(HYMOE_MBARRIER_ENABLED)
  if (mbarrier_try_wait(bar, parity)) return;
  const long long start = clock64();
  while (!mbarrier_try_wait(bar, parity))
    if (clock64() - start > kMbarrierTimeoutClocks) __trap();
#else
  (void)bar;
  (void)parity;
  __trap();
#endif
}

__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t bar) {
#if defined(HYMOE_MBARRIER_ENABLED)
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
  __trap();
#endif
}

__device__ __forceinline__ void cp_async_wait_all() {
#if defined(HYMOE_MBARRIER_ENABLED)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(HYMOE_MBARRIER_ENABLED)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#else
  (void)bar;
  (void)bytes;
  __trap();
#endif
}


__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                              uint32_t bar) {
#if defined(HYMOE_MBARRIER_ENABLED)
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#else
  (void)dst;
  (void)src;
  (void)bytes;
  (void)bar;
  __trap();
#endif
}

}  // namespace hymoe::gpu::kernels
