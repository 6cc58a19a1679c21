// FP8 GEMV for 1..8 tokens with FP8 activations (fp8_gemv_q8): the weights go to the tensor cores
// as they are stored, no conversion instruction at all. The BF16-activation kernels
// (fp8_gemv_mma.cuh) spend ~16 integer instructions a 16-byte weight load converting codes to
// BF16, which bounds them below the copy rate; here a 128-column block of a 16-row tile is two
// 16-byte loads a row half per lane and four m16n8k32 E4M3 mma.
// Block = one 16-row tile x kWarps warps splitting K: warp w takes the 128-column blocks w,
// w + kWarps, ... (kUnroll of them in flight a round). Three shapes of block (4 warps x 4 blocks
// in flight, 8 x 2, 16 x 2: launcher); fewer warps a tile fit more tiles on the GPU at once.
// Lane (g, c) = (lane / 4, lane % 4) loads 16 bytes of rows g and g + 8 and of token g's
// activations at columns 16c.. and 64 + 16c.. of the block. mma j (0..3) of a block takes the lane's word pair (2j mod 4, 2j + 1 mod 4) of
// chunk j / 2: A a0 / a2 = row g's words, a1 / a3 = row g + 8's, B b0 / b1 = token g's, so logical
// k (4c + i, 16 + 4c + i) maps to the same physical column for weights and activations alike and
// the dot products are unchanged. The block's FP32 partial (FP8 products summed by the tensor
// cores, as DeepSeek-V3's recipe does within a 128-block) is scaled once by weight scale x token
// scale into one of 16 running sums, block kb into sum kb % 16 (a warp holds 16 / kWarps of
// them), and the 16 sums are added in order through shared memory: the same operations in the
// same order whatever the block shape, so results are bitwise independent of it.
// Parts (fp8_gemv_q8_fused): up to kGemvMaxFused weights over the same x; their tiles are numbered
// one after the other (tile_end: the running total).
// kPdl: the block lets the next kernel launch at once and issues its first round of weight loads
// before pdl_wait(); activations and their scales are read and outputs written only after it.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/fp8_gemv.h"
#include "mma.cuh"
#include "pdl.cuh"

namespace hymoe::gpu::kernels {

struct GemvQ8Args {
  Fp8GemvQ8Params part[kGemvMaxFused];
  int tile_end[kGemvMaxFused];  // 16-row tiles of parts 0..i
  int parts;
};

// kStage (Fp8GemvQ8Staging): 1 (kScales), the block first computes the products weight scale x
// token scale of all its 128-column blocks into shared memory; 2 (kScalesAndX), it also copies
// the activations there (row pitch q8_staged_pitch, 64 mod 128 so a quarter-warp's 16-byte reads
// of rows g and g + 1 hit distinct banks); both while its first round of weight loads is in
// flight (dynamic shared memory, q8_staged_bytes). Otherwise every block of a round loads them
// from L2 in the compute loop, a round trip each (ncu, run 34: 73% of warp cycles on L1TEX
// waits). The products are the same FP32 multiplications either way: results are bitwise
// identical.
inline constexpr int kQ8StagedMaxBytes = 40 * 1024;  // + 8 KB static: the default 48 KB a block
__host__ __device__ constexpr int64_t q8_staged_pitch(int k) { return (int64_t{k} + 127) / 128 * 128 + 64; }
__host__ __device__ constexpr int64_t q8_staged_bytes(int stage, int tokens, int k) {
  return stage == 0 ? 0 : int64_t{(k + 127) / 128} * 8 * 4 + (stage == 2 ? int64_t{tokens} * q8_staged_pitch(k) : 0);
}

// kUnroll: 128-column blocks in flight per warp; kMinBlocks: resident blocks an SM the register
// budget is cut for (launch bounds).
template <int kWarps, int kUnroll, int kMinBlocks, int kStage, bool kPdl>
__global__ void __launch_bounds__(kWarps * kWarpSize, kMinBlocks) fp8_gemv_q8_kernel(const GemvQ8Args a) {
  if constexpr (kPdl) pdl_launch_dependents();
  constexpr int kSums = 16, kAccs = kSums / kWarps;  // running sums, those of one warp
  static_assert(kSums % kWarps == 0 && kUnroll % kAccs == 0, "block kb's sum must be a constant u % kAccs");
  __shared__ float red[kSums][16][8];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, c = lane % 4;
  int part = 0;
  const int tile = static_cast<int>(blockIdx.x);
  while (part + 1 < a.parts && tile >= a.tile_end[part]) ++part;
  const Fp8GemvQ8Params& p = a.part[part];
  const int row0 = (tile - (part ? a.tile_end[part - 1] : 0)) * 16;
  const int blocks = (p.k + 127) / 128;
  const bool row_lo = row0 + g < p.n, row_hi = row0 + g + 8 < p.n;
  const auto* w = reinterpret_cast<const uint8_t*>(p.w);
  const uint8_t* w_lo = w + (row_lo ? int64_t{row0 + g} : 0) * p.ldw;
  const uint8_t* w_hi = w + (row_hi ? int64_t{row0 + g + 8} : 0) * p.ldw;
  const bool token = g < p.tokens;
  const uint8_t* xg = reinterpret_cast<const uint8_t*>(p.x) + (token ? int64_t{g} : 0) * p.ldx;
  const float* w_scales = p.w_scales + static_cast<int64_t>(row0 / 128) * p.scale_ld;
  // C fragment columns: tokens 2c and 2c + 1 (their activation scales; 0 for absent tokens).
  const bool t0 = 2 * c < p.tokens, t1 = 2 * c + 1 < p.tokens;

  extern __shared__ __align__(16) uint8_t staged[];
  const auto* sprod = reinterpret_cast<const float*>(staged);  // [blocks][8] scale products
  const uint8_t* sx = staged + blocks * 8 * 4;                 // [tokens][pitch] activations
  const int64_t pitch = q8_staged_pitch(p.k);

  float acc[kAccs][4] = {};
  // Every warp runs round 0 (its loads predicated off past k: the staging's barrier needs all of
  // them), then the rounds it has blocks for.
  for (int round = 0;; ++round) {
    const int b0 = warp + round * kWarps * kUnroll;
    if (round > 0 && b0 >= blocks) break;
    uint4 wl[kUnroll][2], wh[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int col = (b0 + u * kWarps) * 128 + c * 16;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // k is a multiple of 16: a lane's 16 columns are all in or all out
        const bool in = col + 64 * h < p.k;
        wl[u][h] = in && row_lo ? __ldcs(reinterpret_cast<const uint4*>(w_lo + col + 64 * h)) : make_uint4(0, 0, 0, 0);
        wh[u][h] = in && row_hi ? __ldcs(reinterpret_cast<const uint4*>(w_hi + col + 64 * h)) : make_uint4(0, 0, 0, 0);
      }
    }
    if (round == 0) {  // its weight loads in flight
      if constexpr (kPdl) pdl_wait();
      if constexpr (kStage >= 1) {
        auto* prod = reinterpret_cast<float*>(staged);
        for (int i = threadIdx.x; i < blocks * 8; i += kWarps * kWarpSize) {
          const int kb = i / 8, t = i % 8;
          prod[i] = t < p.tokens ? __ldg(w_scales + kb) * load_dependent<kPdl>(p.x_scales + int64_t{kb} * p.x_scale_ld + t)
                                 : 0.0f;
        }
      }
      if constexpr (kStage == 2) {
        const int row_chunks = p.k / 16;
        for (int i = threadIdx.x; i < p.tokens * row_chunks; i += kWarps * kWarpSize) {
          const int t = i / row_chunks, j = i % row_chunks;
          *reinterpret_cast<uint4*>(staged + blocks * 8 * 4 + t * pitch + j * 16) =
              load_dependent<kPdl>(reinterpret_cast<const uint4*>(reinterpret_cast<const uint8_t*>(p.x) + t * p.ldx) + j);
        }
      }
      if constexpr (kStage >= 1) {
        __syncthreads();
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = b0 + u * kWarps;
      if (kb >= blocks) break;  // warp-uniform
      // This block's activations (L1 / L2: every tile's blocks read them), after the weights'
      // loads are all in flight. (Loading every block's activations and scales of the round up
      // front, beside the weights, measured slower: the registers it takes spill, run 35.)
      const int col = kb * 128 + c * 16;
      uint4 xv[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool in = col + 64 * h < p.k;
        if constexpr (kStage == 2) {
          xv[h] = in && token ? *reinterpret_cast<const uint4*>(sx + g * pitch + col + 64 * h) : make_uint4(0, 0, 0, 0);
        } else {
          xv[h] = in && token ? load_dependent<kPdl>(reinterpret_cast<const uint4*>(xg + col + 64 * h))
                              : make_uint4(0, 0, 0, 0);
        }
      }
      float part_sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t lo[4] = {wl[u][h].x, wl[u][h].y, wl[u][h].z, wl[u][h].w};
        const uint32_t hi[4] = {wh[u][h].x, wh[u][h].y, wh[u][h].z, wh[u][h].w};
        const uint32_t xs[4] = {xv[h].x, xv[h].y, xv[h].z, xv[h].w};
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const uint32_t af[4] = {lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]};
          mma_fp8_16832(part_sum, af, xs[2 * j], xs[2 * j + 1]);
        }
      }
      float sc0, sc1;
      if constexpr (kStage >= 1) {
        const float2 sp = *reinterpret_cast<const float2*>(sprod + kb * 8 + 2 * c);
        sc0 = sp.x;
        sc1 = sp.y;
      } else {
        const float ws = __ldg(w_scales + kb);
        const float* xsc = p.x_scales + static_cast<int64_t>(kb) * p.x_scale_ld;
        sc0 = t0 ? ws * load_dependent<kPdl>(xsc + 2 * c) : 0.0f;
        sc1 = t1 ? ws * load_dependent<kPdl>(xsc + 2 * c + 1) : 0.0f;
      }
      // kb = warp + kWarps (round * kUnroll + u): sum kb % 16 is this warp's accumulator u % kAccs.
      float(&sum)[4] = acc[u % kAccs];
      sum[0] = fmaf(part_sum[0], sc0, sum[0]);
      sum[1] = fmaf(part_sum[1], sc1, sum[1]);
      sum[2] = fmaf(part_sum[2], sc0, sum[2]);
      sum[3] = fmaf(part_sum[3], sc1, sum[3]);
    }
  }
  // C fragment: rows g (acc 0, 1) and g + 8 (acc 2, 3), tokens 2c and 2c + 1.
#pragma unroll
  for (int j = 0; j < kAccs; ++j) {
    red[warp + j * kWarps][g][2 * c] = acc[j][0];
    red[warp + j * kWarps][g][2 * c + 1] = acc[j][1];
    red[warp + j * kWarps][g + 8][2 * c] = acc[j][2];
    red[warp + j * kWarps][g + 8][2 * c + 1] = acc[j][3];
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    const int r = threadIdx.x / 8, t = threadIdx.x % 8;
    if (row0 + r < p.n && t < p.tokens) {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kSums; ++j) sum += red[j][r][t];
      reinterpret_cast<uint16_t*>(p.y)[t * p.ldy + row0 + r] = float_to_bf16_bits(sum);
    }
  }
}

}  // namespace hymoe::gpu::kernels
