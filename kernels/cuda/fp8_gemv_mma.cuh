// FP8 GEMV for 1..8 tokens on tensor cores (mma.sync m16n8k16 BF16 -> FP32, tokens as N = 8).
// Block = one 16-row tile of the weight x 8 warps splitting K: warp w takes the 64-column chunks
// w, w + 8, ... so the block streams adjacent memory. Lane (g, c) = (lane / 4, lane % 4) loads
// 16 bytes of rows g and g + 8 at columns 16c.. of a chunk; the chunk's 64 columns are fed to
// four k16 mma steps under one fixed permutation (step j, lane c: columns 16c + 4j .. 16c + 4j + 3
// in the fragment slots 2c, 2c + 1, 2c + 8, 2c + 9), applied to the weights (A) and the
// activations (B, token g) alike, so the dot products are unchanged.
// FP8 -> BF16 in registers by bit moves (value times 2^-120, exact, subnormals included); to keep
// the products in FP32's normal range the activations are multiplied by 2^100 (an exponent add,
// exact in BF16) and the result by 2^20 with the block scale. Each chunk's four mma accumulate into a partial that is
// scaled by its 128x128 block's scale_inv before it joins the running sum; the 8 warps' sums are
// added in shared memory.
// kPdl (launched as a programmatic dependent, pdl.cuh): the block lets the next kernel launch as
// soon as it starts, and issues its first round of weight loads before pdl_wait(); activations
// are read and outputs written only after it.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/fp8_gemv.h"
#include "mma.cuh"
#include "pdl.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kGemvMmaWarps = 8;
inline constexpr int kGemvMmaThreads = kGemvMmaWarps * kWarpSize;
inline constexpr int kGemvMmaUnroll = 4;  // chunks in flight per warp

// Two E4M3 codes -> BF16x2 of value * 2^-120 with integer instructions only (the cvt-based
// decode issued at a fraction of the ALU rate and bounded this kernel). kSel picks the codes:
// 0x1404 bytes 0 and 1 of w, 0x3424 bytes 2 and 3. The permute puts each code in the high byte of
// its 16-bit lane; shifted right by 4, the code's exponent and mantissa land in BF16's low
// exponent bits and high mantissa bits, so a normal code (exponent e >= 1) becomes
// 2^(e-127) (1 + m/8) and a subnormal one the BF16 subnormal (m/8) 2^-126: value * 2^-120 both.
template <unsigned kSel>
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_m120(uint32_t w) {
  const uint32_t v = __byte_perm(w, 0u, kSel);  // [code_hi 0 code_lo 0]
  return ((v >> 4) & 0x07f007f0u) | (v & 0x80008000u);
}

// BF16x2 activations -> BF16x2 of value * 2^100 by adding 100 to both exponent fields (one
// integer add). Exact for normal values below 2^28; a zero becomes +-2^-27 (that is 2^-127
// unscaled), far below anything a product with a weight (<= 448) can register in the sum.
__device__ __forceinline__ uint32_t bf16x2_times_2p100(uint32_t w) { return w + 0x32003200u; }

// One 64-column chunk of a 16-row tile: lane (g, c) holds 16 weight bytes of rows g (lo) and
// g + 8 (hi) at columns 16c.. of the chunk and token g's 16 activations there (xa, xb); part
// receives the chunk's unscaled dot products (C fragment) through four k16 mma steps under the
// permutation of the header comment. Shared by the tile kernel and the streaming one
// (fp8_gemv_stream.cuh), so both sum in the same order.
__device__ __forceinline__ void gemv_mma_chunk64(uint4 wl, uint4 wh, uint4 xa, uint4 xb, float (&part)[4]) {
  const uint32_t lo[4] = {wl.x, wl.y, wl.z, wl.w};
  const uint32_t hi[4] = {wh.x, wh.y, wh.z, wh.w};
  const uint32_t xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
  part[0] = part[1] = part[2] = part[3] = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t a0 = e4m3x2_to_bf16x2_m120<0x1404>(lo[j]);
    const uint32_t a2 = e4m3x2_to_bf16x2_m120<0x3424>(lo[j]);
    const uint32_t a1 = e4m3x2_to_bf16x2_m120<0x1404>(hi[j]);
    const uint32_t a3 = e4m3x2_to_bf16x2_m120<0x3424>(hi[j]);
    const uint32_t b0 = bf16x2_times_2p100(xs[2 * j]), b1 = bf16x2_times_2p100(xs[2 * j + 1]);
    mma_16816(part, a0, a1, a2, a3, b0, b1);
  }
}

// Rows row0..row0 + 15 of y: the block's whole K loop and its reduction through red.
template <bool kPdl>
__device__ __forceinline__ void fp8_gemv_mma_tile(const Fp8GemvParams& p, int row0,
                                                  float (&red)[kGemvMmaWarps][16][8]) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, c = lane % 4;
  const int chunks = (p.k + 63) / 64;
  const auto* w = reinterpret_cast<const uint8_t*>(p.w);
  const auto* x = reinterpret_cast<const uint16_t*>(p.x);
  const bool row_lo = row0 + g < p.n, row_hi = row0 + g + 8 < p.n;
  const uint8_t* w_lo = w + (row_lo ? int64_t{row0 + g} : 0) * p.ldw;
  const uint8_t* w_hi = w + (row_hi ? int64_t{row0 + g + 8} : 0) * p.ldw;
  const bool token = g < p.tokens;
  const uint16_t* xg = x + (token ? int64_t{g} : 0) * p.ldx;
  const float* scales = p.w_scales + static_cast<int64_t>(row0 / 128) * p.scale_ld;

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int c0 = warp; c0 < chunks; c0 += kGemvMmaWarps * kGemvMmaUnroll) {
    uint4 wl[kGemvMmaUnroll], wh[kGemvMmaUnroll], xa[kGemvMmaUnroll], xb[kGemvMmaUnroll];
    // kPdl: all weight loads, then pdl_wait(), then the activations (which the previous kernel may
    // write); otherwise each chunk's weights and activations together, as the plain kernel does.
    const int rounds = kPdl ? 2 : 1;
#pragma unroll
    for (int round = 0; round < rounds; ++round) {
      if (kPdl && round == 1) {
        if (c0 == warp && warp == 0 && p.pdl_prefetch_l2 && lane < 16 && row0 + lane < p.n) {
          // First round: row row0 + lane's next bytes (32 KB for the block's 16 rows at most).
          const int64_t begin = int64_t{kGemvMmaWarps} * kGemvMmaUnroll * 64;
          const int64_t bytes = min(int64_t{p.k} - begin, int64_t{kPdlPrefetchBlockBytes / 16});
          if (bytes > 0) prefetch_l2_bulk(w + (row0 + lane) * p.ldw + begin, static_cast<uint32_t>(bytes));
        }
        pdl_wait();
      }
#pragma unroll
      for (int u = 0; u < kGemvMmaUnroll; ++u) {
        const int chunk = c0 + u * kGemvMmaWarps;
        const int col = chunk * 64 + c * 16;  // k is a multiple of 16: a lane's 16 columns are all in or all out
        const bool in = chunk < chunks && col < p.k;
        if (round == 0) {
          wl[u] = in && row_lo ? __ldcs(reinterpret_cast<const uint4*>(w_lo + col)) : make_uint4(0, 0, 0, 0);
          wh[u] = in && row_hi ? __ldcs(reinterpret_cast<const uint4*>(w_hi + col)) : make_uint4(0, 0, 0, 0);
        }
        if (round == rounds - 1) {
          if (in && token) {
            xa[u] = load_dependent<kPdl>(reinterpret_cast<const uint4*>(xg + col));
            xb[u] = load_dependent<kPdl>(reinterpret_cast<const uint4*>(xg + col) + 1);
          } else {
            xa[u] = xb[u] = make_uint4(0, 0, 0, 0);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kGemvMmaUnroll; ++u) {
      const int chunk = c0 + u * kGemvMmaWarps;
      if (chunk >= chunks) break;
      float part[4];
      gemv_mma_chunk64(wl[u], wh[u], xa[u], xb[u], part);
      const float s = __ldg(scales + chunk / 2) * 0x1p20f;  // two 64-column chunks per scale block
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[r] = fmaf(part[r], s, acc[r]);
    }
  }
  if constexpr (kPdl) pdl_wait();  // warps with no chunk (k <= 448) met none in the loop
  store_gemv_fragment(red, warp, g, c, acc);
  __syncthreads();
  store_gemv_tile_sums<kGemvMmaWarps>(red, p.y, p.ldy, row0, p.n, p.tokens, p.y_f32);
}

// One block per 16-row tile.
template <bool kPdl>
__global__ void __launch_bounds__(kGemvMmaThreads) fp8_gemv_mma_kernel(Fp8GemvParams p) {
  if constexpr (kPdl) pdl_launch_dependents();
  __shared__ float red[kGemvMmaWarps][16][8];
  fp8_gemv_mma_tile<kPdl>(p, blockIdx.x * 16, red);
}

}  // namespace hymoe::gpu::kernels
