// Launcher of the block-scaled FP8 mma.sync GEMM.
#include "fp8_block_gemm.cuh"
#include "kernel_launch.h"

namespace hymoe::gpu::launch {

cudaError_t fp8_block_gemm(const Fp8BlockGemmParams& p, cudaStream_t stream) {
  using namespace kernels;
  // Per device (cheap): the two stages need more than the default 48 KB of dynamic smem.
  const cudaError_t attr = cudaFuncSetAttribute(
      fp8_block_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBgSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.n + kBgN - 1) / kBgN, (p.m + kBgM - 1) / kBgM);
  fp8_block_gemm_kernel<<<grid, kBgThreads, kBgSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t fp8_grouped_gemm(const GroupedGemmParams& p, int tiles, cudaStream_t stream) {
  using namespace kernels;
  const cudaError_t attr = cudaFuncSetAttribute(
      fp8_grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBgSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.n + kBgN - 1) / kBgN, tiles);
  fp8_grouped_gemm_kernel<<<grid, kBgThreads, kBgSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
