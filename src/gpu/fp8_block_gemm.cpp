// Checks and dispatch of hymoe's block-scaled FP8 GEMM (kernels/cuda/fp8_block_gemm.cuh).
#include "hymoe/gpu/fp8_block_gemm.h"

#include <cstdint>

#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "kernel_launch.h"

namespace hymoe::gpu {

bool fp8_block_gemm_supported() { return current_device_sm() >= 89; }

bool fp8_block_gemm_wgmma_supported() { return hopper_kernels_usable(); }

void fp8_block_gemm(const Fp8BlockGemmParams& p, cudaStream_t stream, Fp8BlockGemmKernel kernel) {
  const int kb = (p.k + 127) / 128;
  HYMOE_CHECK(p.m >= 1 && p.n >= 1 && p.k >= 16 && p.k % 16 == 0 && p.lda >= p.k &&
                  p.ldb >= p.k && p.lda % 16 == 0 && p.ldb % 16 == 0 && p.ldd >= p.n &&
                  p.a_scale_ld >= p.m && p.b_scale_ld >= kb,
              kInvalidArgument,
              "fp8_block_gemm: bad shape m={} n={} k={} lda={} ldb={} ldd={} a_scale_ld={} "
              "b_scale_ld={} (k, lda, ldb multiples of 16)",
              p.m, p.n, p.k, p.lda, p.ldb, p.ldd, p.a_scale_ld, p.b_scale_ld);
  HYMOE_CHECK(p.a && p.b && p.a_scale && p.b_scale && p.d, kInvalidArgument,
              "fp8_block_gemm: null operand");
  HYMOE_CHECK(reinterpret_cast<uintptr_t>(p.a) % 16 == 0 && reinterpret_cast<uintptr_t>(p.b) % 16 == 0,
              kInvalidArgument, "fp8_block_gemm: A and B must be 16-byte aligned");
  if (kernel != Fp8BlockGemmKernel::kMmaSync) {
    HYMOE_CHECK(fp8_block_gemm_wgmma_supported(), kUnsupported,
                "fp8_block_gemm (wgmma) needs compute capability 9.0 and a build with CUDA "
                "architecture 90a");
  } else {
    HYMOE_CHECK(fp8_block_gemm_supported(), kUnsupported,
                "fp8_block_gemm needs FP8 tensor cores (compute capability 8.9 or newer)");
  }
  HYMOE_CUDA_CHECK(launch::fp8_block_gemm(p, kernel, stream));
}

}  // namespace hymoe::gpu
