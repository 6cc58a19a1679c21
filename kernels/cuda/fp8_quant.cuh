// Per-token, per-128-column FP8 quantisation. One warp per (token, column block); each lane owns
// four consecutive columns (8-byte loads when rows allow). kPdl: launched as a programmatic
// dependent (pdl.cuh): lets the next kernel launch, then waits for the previous one before it
// reads x or writes anything.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/fp8_quant.h"
#include "pdl.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kQuantWarpsPerBlock = 8;

template <bool kVec, bool kPdl>
__global__ void __launch_bounds__(kQuantWarpsPerBlock * kWarpSize)
fp8_quant_kernel(Fp8QuantParams p, int col_blocks) {
  if constexpr (kPdl) {
    pdl_launch_dependents();
    pdl_wait();
  }
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kQuantWarpsPerBlock + warp;
  if (item >= static_cast<int64_t>(p.tokens) * col_blocks) return;
  const int t = static_cast<int>(item / col_blocks), kb = static_cast<int>(item % col_blocks);
  const int c0 = kb * 128 + lane * 4;
  const auto* x = reinterpret_cast<const uint16_t*>(p.x) + t * p.x_stride;
  auto* out = reinterpret_cast<uint8_t*>(p.out) + t * p.out_stride;

  float v[4];
  if constexpr (kVec) {  // cols % 128 == 0: every lane's four columns exist
    const uint2 raw = *reinterpret_cast<const uint2*>(x + c0);
    v[0] = __uint_as_float(raw.x << 16);
    v[1] = __uint_as_float(raw.x & 0xffff0000u);
    v[2] = __uint_as_float(raw.y << 16);
    v[3] = __uint_as_float(raw.y & 0xffff0000u);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = c0 + j < p.cols ? bf16_bits_to_float(x[c0 + j]) : 0.0f;
  }
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
  amax = warp_max(amax);
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
  uint8_t q[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) q[j] = float_to_fp8_bits(v[j] / scale);
  if constexpr (kVec) {
    *reinterpret_cast<uint32_t*>(out + c0) =
        q[0] | (uint32_t{q[1]} << 8) | (uint32_t{q[2]} << 16) | (uint32_t{q[3]} << 24);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (c0 + j < p.cols) out[c0 + j] = q[j];
  }
  if (lane == 0) {
    int64_t index = static_cast<int64_t>(kb) * p.scale_ld + t;
    if (p.group_offsets) {  // last group whose offset <= t (binary search)
      int lo = 0, hi = p.groups - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (p.group_offsets[mid] <= t) lo = mid; else hi = mid - 1;
      }
      const int off = p.group_offsets[lo], rows = p.group_offsets[lo + 1] - off;
      index = grouped_scale_offset(col_blocks, off, lo) + static_cast<int64_t>(kb) * rows + (t - off);
    }
    p.scales[index] = scale;
  }
}

}  // namespace hymoe::gpu::kernels
