// Launcher of the sampling kernel.
#include "kernel_launch.h"
#include "sampling.cuh"

namespace hymoe::gpu::launch {

cudaError_t sample_tokens(const SamplingParams& p, cudaStream_t stream) {
  kernels::sample_kernel<<<p.rows, kernels::kSampleThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
