// Launchers of the block-scaled FP8 GEMMs: mma.sync (fp8_block_gemm.cuh) and wgmma
// (fp8_block_gemm_wgmma.cuh).
#include "fp8_block_gemm.cuh"
#include "fp8_block_gemm_wgmma.cuh"
#include "kernel_launch.h"

namespace hymoe::gpu::launch {

namespace {
// Per call (cheap): the stages need more than the default 48 KB of dynamic smem.
template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
}  // namespace

cudaError_t fp8_block_gemm(const Fp8BlockGemmParams& p, Fp8BlockGemmKernel kernel,
                           cudaStream_t stream) {
  using namespace kernels;
  if (kernel == Fp8BlockGemmKernel::kWgmma) {
    const cudaError_t attr = allow_smem(fp8_block_gemm_wgmma_kernel, kWgSmemBytes);
    if (attr != cudaSuccess) return attr;
    const int tiles = ((p.n + kWgN - 1) / kWgN) * ((p.m + kWgM - 1) / kWgM);
    fp8_block_gemm_wgmma_kernel<<<tiles, kWgThreads, kWgSmemBytes, stream>>>(p);
    return cudaGetLastError();
  }
  const cudaError_t attr = allow_smem(fp8_block_gemm_kernel, kBgSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.n + kBgN - 1) / kBgN, (p.m + kBgM - 1) / kBgM);
  fp8_block_gemm_kernel<<<grid, kBgThreads, kBgSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

int fp8_grouped_gemm_tile_rows(Fp8BlockGemmKernel kernel) {
  return kernel == Fp8BlockGemmKernel::kWgmma ? kernels::kWgM : kernels::kBgM;
}

cudaError_t fp8_grouped_gemm(const GroupedGemmParams& p, Fp8BlockGemmKernel kernel, int tiles,
                             cudaStream_t stream) {
  using namespace kernels;
  if (kernel == Fp8BlockGemmKernel::kWgmma) {
    const cudaError_t attr = allow_smem(fp8_grouped_gemm_wgmma_kernel, kWgSmemBytes);
    if (attr != cudaSuccess) return attr;
    const dim3 grid((p.n + kWgN - 1) / kWgN, tiles);
    fp8_grouped_gemm_wgmma_kernel<<<grid, kWgThreads, kWgSmemBytes, stream>>>(p);
    return cudaGetLastError();
  }
  const cudaError_t attr = allow_smem(fp8_grouped_gemm_kernel, kBgSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.n + kBgN - 1) / kBgN, tiles);
  fp8_grouped_gemm_kernel<<<grid, kBgThreads, kBgSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
