// hymoe's own block-scaled FP8 GEMM: the same operation and layouts as GemmKind::kFp8BlockScale
// (gemm.h), for shapes cuBLASLt has no algorithm for (GemmPlan falls back to it), the grouped
// expert GEMM (moe.h) and as a cross-check of cuBLASLt. Two kernels:
//   kMmaSync  mma.sync m16n8k32 (sm_89 and newer: Ada, Hopper, Blackwell incl. the RTX 5090),
//             64 x 128 tiles;
//   kWgmma    Hopper's warpgroup MMA (sm_90a only; the build must include CUDA architecture 90a),
//             128 x 128 tiles of two warpgroups, a 5-slot cp.async ring
//             (kernels/cuda/fp8_block_gemm_wgmma.cuh);
//   kWgmma64  the same with 64 x 128 tiles of one warpgroup, two blocks per SM (small row counts);
//   kWgmmaWs  the same 128 x 128 tiles, warp-specialised (a producer warpgroup loading a 6-slot
//             ring, full/empty mbarriers, two consumer warpgroups) and persistent (one block per
//             SM walks the tiles) (kernels/cuda/fp8_block_gemm_wgmma_ws.cuh);
//   kWgmmaWsPipe  the same, each consumer promoting block kb - 1 under block kb's wgmmas (two
//             partial accumulators) instead of after them;
//   kWgmmaWs64  kWgmmaWsPipe with 64-row tiles of one consumer warpgroup, two blocks per SM;
//   kWgmmaWsTma kWgmmaWsPipe loading through TMA (one producer thread, tensor maps built per
//             launch; dense only: the grouped GEMM's weights are one pointer per expert).
//   kWgmmaWsTmaCross kWgmmaWsTma with the cross-step schedule: each consumer issues block
//             kb + 1's wgmmas before waiting for kb's (wgmma.wait_group 1), promotes kb under
//             them and releases kb's slot after that wait (the fastest on the H200; kAuto's
//             choice).
//   D[m, n] (BF16) = A[m, k] (FP8, a_scale[kb * a_scale_ld + row]) * B[n, k]^T (FP8,
//   b_scale[(row / 128) * b_scale_ld + kb]), FP32 accumulation promoted once per 128-wide K block.
// k, lda and ldb are multiples of 16 and a, b 16-byte aligned; m, n and k otherwise arbitrary.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

struct Fp8BlockGemmParams {
  const Fp8E4M3* a = nullptr;
  const float* a_scale = nullptr;   // [ceil(k/128)][a_scale_ld], a_scale_ld >= m
  const Fp8E4M3* b = nullptr;
  const float* b_scale = nullptr;   // [ceil(n/128)][b_scale_ld], b_scale_ld >= ceil(k/128)
  Bf16* d = nullptr;
  int m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t a_scale_ld = 0, b_scale_ld = 0;
};

enum class Fp8BlockGemmKernel {
  kMmaSync, kWgmma, kWgmma64, kWgmmaWs, kWgmmaWsPipe, kWgmmaWs64, kWgmmaWsTma, kWgmmaWsTmaCross
};

// Whether the current device runs the mma.sync kernel (compute capability 8.9 or newer).
bool fp8_block_gemm_supported();
// Whether it runs the wgmma kernel: compute capability 9.0 and sm_90a code in this build.
bool fp8_block_gemm_wgmma_supported();
// Checks shapes and alignment (kInvalidArgument), the device (kUnsupported), launches on stream.
void fp8_block_gemm(const Fp8BlockGemmParams& p, cudaStream_t stream,
                    Fp8BlockGemmKernel kernel = Fp8BlockGemmKernel::kMmaSync);

}  // namespace hymoe::gpu
