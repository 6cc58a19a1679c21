// FP8 GEMV for 1..8 tokens on CUDA cores, one warp per kRows consecutive output rows (no block
// synchronisation: warps retire independently). Lanes split K into 16-byte chunks (16 FP8
// weights): lane l takes chunks l, l + 32, ...; every lane issues kUnroll x kRows streaming 16-byte
// weight loads before it uses the first, so each SM keeps enough bytes in flight to cover DRAM
// latency even for the short rows of 7168x2048. Each chunk's 16-term partial dot is scaled by its
// 128x128 block's scale_inv and accumulated in FP32; a warp shuffle sums the lanes. The
// activations (a few KB) are re-read through L1/L2 by every warp.
// Decode without conversion instructions (F2F issues at a fraction of the FMA rate and capped
// the cvt-based version near 70% of copy bandwidth): an E4M3 code's exponent and mantissa bits
// moved into an FP32's make that code's value times 2^-120, exactly, subnormals included (they
// become FP32 denormals, which the FMA keeps). The 2^120 is split: activations are multiplied by
// 2^60 as they are read and the block scale by 2^60, so the products stay normal FP32 numbers.
// The NaN codes 0x7f/0xff (absent from checkpoints) decode as +-480 instead of NaN.
// kPdl (launched as a programmatic dependent, pdl.cuh): the block lets the next kernel launch as
// soon as it starts, and issues its first round of weight loads before pdl_wait(); activations
// are read and outputs written only after it.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/fp8_gemv.h"
#include "pdl.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kGemvWarps = 4;
inline constexpr int kGemvThreads = kGemvWarps * kWarpSize;
// 16-byte weight loads per lane per round: 16 for 1-2 tokens (registers allow 4 blocks an SM),
// 8 beyond (the activations' registers grow with the tokens).
__host__ __device__ constexpr int gemv_loads_in_flight(int tokens) { return tokens <= 2 ? 16 : 8; }
inline constexpr float kGemvHalfBias = 0x1p60f;  // see the header comment: 2^120 = 2^60 * 2^60

// Byte i (0..3) of w, an E4M3 code, as FP32 value * 2^-120 (two shifts and one bit-select).
template <int i>
__device__ __forceinline__ float e4m3_times_2m120(uint32_t w) {
  const uint32_t mag = i < 3 ? (w << (20 - 8 * i)) : (w >> 4);  // exponent+mantissa -> bits 20..26
  const uint32_t sign = w << (24 - 8 * i);                      // sign -> bit 31
  return __uint_as_float((mag & 0x07f00000u) | (sign & 0x80000000u));
}

// Rows per warp (1, 2 or 4) for a K of `chunks` 16-byte chunks: as many rows as fit in one round
// of gemv_loads_in_flight loads per lane, so short rows still keep a lane's loads in flight and a
// warp's whole work is issued at once (one DRAM latency, fewer blocks, fewer waves).
inline int gemv_rows_per_warp(int chunks, int tokens) {
  const int per_lane = (chunks + kWarpSize - 1) / kWarpSize;
  const int rows = gemv_loads_in_flight(tokens) / per_lane;
  return rows >= 4 ? 4 : rows >= 2 ? 2 : 1;
}

template <int kTokens, int kRows, bool kPdl>
__global__ void __launch_bounds__(kGemvThreads, kTokens <= 2 ? 4 : 2) fp8_gemv_kernel(Fp8GemvParams p) {
  constexpr int kUnroll = gemv_loads_in_flight(kTokens) / kRows;
  if constexpr (kPdl) pdl_launch_dependents();
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int row0 = (blockIdx.x * kGemvWarps + warp) * kRows;
  if (row0 >= p.n) return;
  const int chunks = p.k / 16;
  const auto* w = reinterpret_cast<const uint8_t*>(p.w);
  const auto* x = reinterpret_cast<const uint16_t*>(p.x);
  const float* scale_row[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) scale_row[r] = p.w_scales + (min(row0 + r, p.n - 1) / 128) * p.scale_ld;

  float acc[kRows][kTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;

  for (int c0 = lane; c0 < chunks; c0 += kWarpSize * kUnroll) {
    uint4 wv[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * kWarpSize;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        wv[u][r] = c < chunks && row0 + r < p.n
                       ? __ldcs(reinterpret_cast<const uint4*>(w + (row0 + r) * p.ldw) + c)
                       : make_uint4(0, 0, 0, 0);
      }
    }
    if constexpr (kPdl) {  // the weights above do not depend on the previous kernel
      if (c0 == lane && p.pdl_prefetch_l2 && lane < kRows && row0 + lane < p.n) {
        // First round: row row0 + lane's next bytes (rows of one block: 32 KB at most).
        const int64_t begin = int64_t{kWarpSize} * kUnroll * 16;
        const int64_t bytes = min(int64_t{p.k} - begin, int64_t{kPdlPrefetchBlockBytes / (kGemvWarps * kRows)});
        if (bytes > 0) prefetch_l2_bulk(w + (row0 + lane) * p.ldw + begin, static_cast<uint32_t>(bytes));
      }
      pdl_wait();
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * kWarpSize;
      if (c >= chunks) break;
      float dot[kRows][kTokens];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int t = 0; t < kTokens; ++t) dot[r][t] = 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // 8 weights (two 32-bit words) at a time
        float xf[kTokens][8];
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          const uint4 v = load_dependent<kPdl>(reinterpret_cast<const uint4*>(x + t * p.ldx + c * 16) + half);
          const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            xf[t][2 * i] = __uint_as_float(words[i] << 16) * kGemvHalfBias;
            xf[t][2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u) * kGemvHalfBias;
          }
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const uint32_t words[2] = {half ? wv[u][r].z : wv[u][r].x, half ? wv[u][r].w : wv[u][r].y};
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const float w0 = e4m3_times_2m120<0>(words[i]), w1 = e4m3_times_2m120<1>(words[i]);
            const float w2 = e4m3_times_2m120<2>(words[i]), w3 = e4m3_times_2m120<3>(words[i]);
#pragma unroll
            for (int t = 0; t < kTokens; ++t) {
              dot[r][t] = fmaf(w0, xf[t][4 * i], dot[r][t]);
              dot[r][t] = fmaf(w1, xf[t][4 * i + 1], dot[r][t]);
              dot[r][t] = fmaf(w2, xf[t][4 * i + 2], dot[r][t]);
              dot[r][t] = fmaf(w3, xf[t][4 * i + 3], dot[r][t]);
            }
          }
        }
      }
      const int kb = c / 8;  // 8 chunks of 16 per 128-column scale block
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float scale = __ldg(scale_row[r] + kb) * kGemvHalfBias;
#pragma unroll
        for (int t = 0; t < kTokens; ++t) acc[r][t] = fmaf(dot[r][t], scale, acc[r][t]);
      }
    }
  }

  if constexpr (kPdl) pdl_wait();  // lanes with no chunk (k < 512) met none in the loop
  auto* y = reinterpret_cast<uint16_t*>(p.y);
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0 && row0 + r < p.n) {
        if (p.y_f32) {
          p.y_f32[t * p.ldy + row0 + r] = v;
        } else {
          y[t * p.ldy + row0 + r] = float_to_bf16_bits(v);
        }
      }
    }
}

}  // namespace hymoe::gpu::kernels
