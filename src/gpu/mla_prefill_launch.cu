// Launcher of MLA prefill attention.
#include "kernel_launch.h"
#include "mla_gather_k.cuh"
#include "mla_merge.cuh"
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

cudaError_t mla_merge_attention(const MlaMergeParams& p, cudaStream_t stream) {
  kernels::mla_merge_attention_kernel<<<p.rows, 256, sizeof(float) * 2 * p.heads, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t mla_gather_k(const MlaPrefillParams& p, int keys, Bf16* dst, cudaStream_t stream) {
  const int64_t total = int64_t{keys} * p.heads * kernels::kGatherChunks;
  if (total == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
  kernels::mla_gather_k_kernel<<<blocks, kThreads, 0, stream>>>(p, keys, dst);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
