// Launcher of MLA prefill attention.
#include "kernel_launch.h"
#include "mla_prefill.cuh"
#include "mla_prefill_mma.cuh"

namespace hymoe::gpu::launch {

cudaError_t mla_prefill(const MlaPrefillParams& p, cudaStream_t stream) {
  if (p.impl != MlaPrefillImpl::kCudaCores) {
    const cudaError_t attr = cudaFuncSetAttribute(kernels::mla_prefill_mma_kernel,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  kernels::kPfSmemBytes);
    if (attr != cudaSuccess) return attr;
    const dim3 grid((p.tokens + kernels::kPfQ - 1) / kernels::kPfQ, p.heads);
    kernels::mla_prefill_mma_kernel<<<grid, kernels::kPfThreads, kernels::kPfSmemBytes, stream>>>(p);
    return cudaGetLastError();
  }
  const dim3 grid((p.tokens + kernels::kPrefillTile - 1) / kernels::kPrefillTile, p.heads);
  kernels::mla_prefill_kernel<<<grid, kernels::kPrefillThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
