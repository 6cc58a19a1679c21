// Launchers of the FP8 kernels: activation quantiser and GEMV (token count -> template parameter
// through one switch; Fp8GemvParams::pdl -> the PDL variant, launched with its attribute).
#include <algorithm>

#include "fp8_gemv.cuh"
#include "fp8_gemv_mma.cuh"
#include "fp8_quant.cuh"
#include "kernel_launch.h"
#include "pdl_launch.h"

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

namespace {

// A plain launch for pdl == false (the kernel without griddepcontrol, as before PDL existed), the
// PDL variant through cudaLaunchKernelEx otherwise.
template <int kTokens, int kRows>
cudaError_t launch_gemv_rows(const Fp8GemvParams& p, int blocks, cudaStream_t stream) {
  if (p.pdl) {
    return launch_kernel(kernels::fp8_gemv_kernel<kTokens, kRows, true>, dim3(blocks),
                         dim3(kernels::kGemvThreads), true, stream, p);
  }
  kernels::fp8_gemv_kernel<kTokens, kRows, false><<<blocks, kernels::kGemvThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <int kTokens>
cudaError_t launch_gemv(const Fp8GemvParams& p, cudaStream_t stream) {
  const int rows = kernels::gemv_rows_per_warp(p.k / 16, kTokens);
  const int blocks = (p.n + kernels::kGemvWarps * rows - 1) / (kernels::kGemvWarps * rows);
  switch (rows) {
    case 1: return launch_gemv_rows<kTokens, 1>(p, blocks, stream);
    case 2: return launch_gemv_rows<kTokens, 2>(p, blocks, stream);
    default: return launch_gemv_rows<kTokens, 4>(p, blocks, stream);
  }
}

// Fp8GemvParams::persistent: one wave of blocks (as many as are resident at once), each looping
// over 16-row tiles.
template <bool kPdl>
cudaError_t launch_mma_persistent(const Fp8GemvParams& p, cudaStream_t stream) {
  auto* kernel = kernels::fp8_gemv_mma_persistent_kernel<kPdl>;
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess)
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kernels::kGemvMmaThreads, 0);
  if (err != cudaSuccess) return err;
  const int grid = std::max(1, std::min((p.n + 15) / 16, sms * per_sm));
  return launch_kernel(kernel, dim3(grid), dim3(kernels::kGemvMmaThreads), kPdl, stream, p);
}

}  // namespace

cudaError_t fp8_gemv(const Fp8GemvParams& p, bool tensor_cores, cudaStream_t stream) {
  if (tensor_cores) {
    if (p.persistent) {
      return p.pdl ? launch_mma_persistent<true>(p, stream) : launch_mma_persistent<false>(p, stream);
    }
    const dim3 grid((p.n + 15) / 16);
    if (p.pdl) {
      return launch_kernel(kernels::fp8_gemv_mma_kernel<true>, grid, dim3(kernels::kGemvMmaThreads),
                           true, stream, p);
    }
    kernels::fp8_gemv_mma_kernel<false><<<grid, kernels::kGemvMmaThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
  switch (p.tokens) {
    case 1: return launch_gemv<1>(p, stream);
    case 2: return launch_gemv<2>(p, stream);
    case 3: return launch_gemv<3>(p, stream);
    case 4: return launch_gemv<4>(p, stream);
    case 5: return launch_gemv<5>(p, stream);
    case 6: return launch_gemv<6>(p, stream);
    case 7: return launch_gemv<7>(p, stream);
    case 8: return launch_gemv<8>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace hymoe::gpu::launch
