// The SM clock, measured on the device: one thread counts its SM's clock cycles (clock64) across
// a span of the GPU's global timer (%globaltimer, nanoseconds). No NVML needed.
#pragma once

#include <cstdint>

namespace hymoe::gpu::kernels {

// Thread 0 spins until `spin_ns` nanoseconds of the global timer have passed, then writes the
// cycles per microsecond (MHz) it counted to *mhz. One block of one warp is enough.
__global__ void sm_clock_kernel(uint64_t spin_ns, float* mhz) {
  if (threadIdx.x != 0) return;
  uint64_t t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  } while (t1 - t0 < spin_ns);
  const long long c1 = clock64();
  *mhz = static_cast<float>(static_cast<double>(c1 - c0) * 1e3 / static_cast<double>(t1 - t0));
}

}  // namespace hymoe::gpu::kernels
