// Launcher of MLA prefill attention.
#include "kernel_launch.h"
#include "mla_prefill.cuh"

namespace hymoe::gpu::launch {

cudaError_t mla_prefill(const MlaPrefillParams& p, cudaStream_t stream) {
  const dim3 grid((p.tokens + kernels::kPrefillTile - 1) / kernels::kPrefillTile, p.heads);
  kernels::mla_prefill_kernel<<<grid, kernels::kPrefillThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
