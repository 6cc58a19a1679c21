// FP8 GEMV for 1..8 tokens on CUDA cores. A block owns kRows consecutive output rows and splits
// K among its threads in 16-byte chunks (16 FP8 weights): thread i takes chunks i, i+threads, ...
// Each chunk's 16-term partial dot is scaled by its 128x128 block's scale_inv and accumulated in
// FP32; then a warp-shuffle and shared-memory reduction over the block. The weight is streamed
// once (no L1 allocation); the activations are re-read through L1 by every block.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/fp8_gemv.h"

namespace hymoe::gpu::kernels {

inline constexpr int kGemvRows = 4;
inline constexpr int kGemvMaxThreads = 256;

template <int kTokens>
__global__ void __launch_bounds__(kGemvMaxThreads) fp8_gemv_kernel(Fp8GemvParams p) {
  __shared__ float partial[kGemvMaxThreads / kWarpSize][kGemvRows][kTokens];
  const int row0 = blockIdx.x * kGemvRows;
  const int chunks = p.k / 16;
  const auto* w = reinterpret_cast<const uint8_t*>(p.w);
  const auto* x = reinterpret_cast<const uint16_t*>(p.x);

  float acc[kGemvRows][kTokens];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;

  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    // Issue every load of this chunk before the first use.
    uint4 wv[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const int row = row0 + r;
      wv[r] = row < p.n ? __ldcs(reinterpret_cast<const uint4*>(w + row * p.ldw) + c)
                        : make_uint4(0, 0, 0, 0);
    }
    float xf[kTokens][16];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const auto* xp = reinterpret_cast<const uint4*>(x + t * p.ldx + c * 16);
      const uint4 lo = __ldg(xp), hi = __ldg(xp + 1);
      const uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        xf[t][2 * i] = __uint_as_float(words[i] << 16);
        xf[t][2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
    const int kb = c / 8;  // 8 chunks of 16 per 128-column scale block
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const int row = min(row0 + r, p.n - 1);
      const float scale = __ldg(p.w_scales + (row / 128) * p.scale_ld + kb);
      const uint32_t words[4] = {wv[r].x, wv[r].y, wv[r].z, wv[r].w};
      float dot[kTokens];
#pragma unroll
      for (int t = 0; t < kTokens; ++t) dot[t] = 0.0f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 a = fp8x2_bits_to_float2(static_cast<uint16_t>(words[i] & 0xffffu));
        const float2 b = fp8x2_bits_to_float2(static_cast<uint16_t>(words[i] >> 16));
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          dot[t] = fmaf(a.x, xf[t][4 * i], dot[t]);
          dot[t] = fmaf(a.y, xf[t][4 * i + 1], dot[t]);
          dot[t] = fmaf(b.x, xf[t][4 * i + 2], dot[t]);
          dot[t] = fmaf(b.y, xf[t][4 * i + 3], dot[t]);
        }
      }
#pragma unroll
      for (int t = 0; t < kTokens; ++t) acc[r][t] = fmaf(dot[t], scale, acc[r][t]);
    }
  }

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0) partial[warp][r][t] = v;
    }
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  for (int i = threadIdx.x; i < kGemvRows * kTokens; i += blockDim.x) {
    const int r = i / kTokens, t = i % kTokens;
    if (row0 + r >= p.n) continue;
    float sum = 0.0f;
    for (int wi = 0; wi < warps; ++wi) sum += partial[wi][r][t];
    reinterpret_cast<uint16_t*>(p.y)[t * p.ldy + row0 + r] = float_to_bf16_bits(sum);
  }
}

}  // namespace hymoe::gpu::kernels
