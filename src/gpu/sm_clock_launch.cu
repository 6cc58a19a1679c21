// Launcher of kernels/cuda/sm_clock.cuh (sm_clock.cpp checks the arguments).
#include <cstdint>

#include "kernel_launch.h"
#include "sm_clock.cuh"

namespace hymoe::gpu::launch {

cudaError_t sm_clock(uint64_t spin_ns, float* mhz, cudaStream_t stream) {
  kernels::sm_clock_kernel<<<1, 32, 0, stream>>>(spin_ns, mhz);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
