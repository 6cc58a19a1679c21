// Launchers of the FP8 kernels: activation quantiser and GEMV (token count -> template parameter
// through one switch).
#include <algorithm>

#include "fp8_gemv.cuh"
#include "fp8_quant.cuh"
#include "kernel_launch.h"

namespace hymoe::gpu::launch {

cudaError_t quantize_fp8(const Fp8QuantParams& p, bool vec, cudaStream_t stream) {
  const int col_blocks = (p.cols + kFp8BlockSize - 1) / kFp8BlockSize;
  const int64_t items = static_cast<int64_t>(p.tokens) * col_blocks;
  constexpr int kWarps = kernels::kQuantWarpsPerBlock;
  const dim3 grid(static_cast<unsigned>((items + kWarps - 1) / kWarps));
  if (vec) {
    kernels::fp8_quant_kernel<true><<<grid, kWarps * kernels::kWarpSize, 0, stream>>>(p, col_blocks);
  } else {
    kernels::fp8_quant_kernel<false><<<grid, kWarps * kernels::kWarpSize, 0, stream>>>(p, col_blocks);
  }
  return cudaGetLastError();
}

cudaError_t fp8_gemv(const Fp8GemvParams& p, cudaStream_t stream) {
  const int chunks = p.k / 16;
  const int threads = std::clamp((chunks + 31) / 32 * 32, 32, kernels::kGemvMaxThreads);
  const int blocks = (p.n + kernels::kGemvRows - 1) / kernels::kGemvRows;
  switch (p.tokens) {
    case 1: kernels::fp8_gemv_kernel<1><<<blocks, threads, 0, stream>>>(p); break;
    case 2: kernels::fp8_gemv_kernel<2><<<blocks, threads, 0, stream>>>(p); break;
    case 3: kernels::fp8_gemv_kernel<3><<<blocks, threads, 0, stream>>>(p); break;
    case 4: kernels::fp8_gemv_kernel<4><<<blocks, threads, 0, stream>>>(p); break;
    case 5: kernels::fp8_gemv_kernel<5><<<blocks, threads, 0, stream>>>(p); break;
    case 6: kernels::fp8_gemv_kernel<6><<<blocks, threads, 0, stream>>>(p); break;
    case 7: kernels::fp8_gemv_kernel<7><<<blocks, threads, 0, stream>>>(p); break;
    case 8: kernels::fp8_gemv_kernel<8><<<blocks, threads, 0, stream>>>(p); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
