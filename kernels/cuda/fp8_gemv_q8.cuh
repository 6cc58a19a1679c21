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
// from L2 in the compute loop, a round trip each (ncu: 73% of warp cycles on L1TEX waits). The
// products are the same FP32 multiplications either way: results are bitwise identical.
inline constexpr int kQ8StagedMaxBytes = 40 * 1024;  // + 8 KB static: the default 48 KB a block
__host__ __device__ constexpr int64_t q8_staged_pitch(int k) { return (int64_t{k} + 127) / 128 * 128 + 64; }
__host__ __device__ constexpr int64_t q8_staged_bytes(int stage, int tokens, int k) {
  return stage == 0 ? 0 : int64_t{(k + 127) / 128} * 8 * 4 + (stage == 2 ? int64_t{tokens} * q8_staged_pitch(k) : 0);
}

// What a block of either q8 kernel (the rounds one here, the ring one in fp8_gemv_q8_ring.cuh)
// knows of its 16-row tile, and the per-block work: the rounds kernel's staging and loads of a
// block's activations and scales, one 128-column block's four mma and its scaling into a running
// sum (both kernels), and the final reduction through shared memory and store (both). Both
// kernels add block kb into sum kb % 16 in the same order, so their results are bitwise equal.
template <bool kPdl>
struct Q8Tile {
  const Fp8GemvQ8Params& p;
  int row0, blocks, g, c;
  bool row_lo, row_hi, token, t0, t1;
  const uint8_t* w_lo;
  const uint8_t* w_hi;
  const uint8_t* xg;
  const float* w_scales;

  __device__ static int part_of(const GemvQ8Args& a, int tile) {
    int part = 0;
    while (part + 1 < a.parts && tile >= a.tile_end[part]) ++part;
    return part;
  }
  __device__ Q8Tile(const GemvQ8Args& a, int tile, int lane) : Q8Tile(a, tile, lane, part_of(a, tile)) {}
  __device__ Q8Tile(const GemvQ8Args& a, int tile, int lane, int part)
      : p(a.part[part]),
        row0((tile - (part ? a.tile_end[part - 1] : 0)) * 16),
        blocks((p.k + 127) / 128),
        g(lane / 4),
        c(lane % 4) {
    row_lo = row0 + g < p.n;
    row_hi = row0 + g + 8 < p.n;
    const auto* w = reinterpret_cast<const uint8_t*>(p.w);
    w_lo = w + (row_lo ? int64_t{row0 + g} : 0) * p.ldw;
    w_hi = w + (row_hi ? int64_t{row0 + g + 8} : 0) * p.ldw;
    token = g < p.tokens;
    xg = reinterpret_cast<const uint8_t*>(p.x) + (token ? int64_t{g} : 0) * p.ldx;
    w_scales = p.w_scales + static_cast<int64_t>(row0 / 128) * p.scale_ld;
    // C fragment columns: tokens 2c and 2c + 1 (their activation scales; 0 for absent tokens).
    t0 = 2 * c < p.tokens;
    t1 = 2 * c + 1 < p.tokens;
  }

  // kStage >= 1: the scale products of every block, kStage 2: and the activations, into staged
  // (all threads of the block, after pdl_wait; ends with a block barrier).
  // Each thread issues kBatch loads before it stores any (one L2 round trip a batch: a loop of
  // dependent load-store pairs waits on L2 once an element).
  template <int kStage, int kThreads>
  __device__ void stage(uint8_t* staged) const {
    if constexpr (kStage >= 1) {
      constexpr int kBatch = 8;
      auto* prod = reinterpret_cast<float*>(staged);
      const int total = blocks * 8;
      for (int base = threadIdx.x; base < total; base += kThreads * kBatch) {
        float v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = base + j * kThreads, kb = i / 8, t = i % 8;
          v[j] = i < total && t < p.tokens
                     ? __ldg(w_scales + kb) * load_dependent<kPdl>(p.x_scales + int64_t{kb} * p.x_scale_ld + t)
                     : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
          if (base + j * kThreads < total) prod[base + j * kThreads] = v[j];
      }
    }
    if constexpr (kStage == 2) {
      constexpr int kBatch = 4;
      const int64_t pitch = q8_staged_pitch(p.k);
      const int row_chunks = p.k / 16, total = p.tokens * row_chunks;
      for (int base = threadIdx.x; base < total; base += kThreads * kBatch) {
        uint4 v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = base + j * kThreads, t = i / row_chunks, c16 = i % row_chunks;
          v[j] = i < total ? load_dependent<kPdl>(reinterpret_cast<const uint4*>(reinterpret_cast<const uint8_t*>(p.x) +
                                                                                 t * p.ldx) +
                                                  c16)
                           : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = base + j * kThreads, t = i / row_chunks, c16 = i % row_chunks;
          if (i < total) *reinterpret_cast<uint4*>(staged + blocks * 8 * 4 + t * pitch + c16 * 16) = v[j];
        }
      }
    }
    if constexpr (kStage >= 1) __syncthreads();
  }

  // Block kb (weight fragments lo / hi: rows g and g + 8, column halves h) into sum.
  template <int kStage>
  __device__ void accumulate(int kb, const uint4 (&wl)[2], const uint4 (&wh)[2], const uint8_t* staged,
                             float (&sum)[4]) const {
    // This block's activations (L1 / L2: every tile's blocks read them), after the weights'
    // loads are all in flight. (Loading every block's activations and scales of the round up
    // front, beside the weights, measured slower: the registers it takes spill.)
    const int col = kb * 128 + c * 16;
    uint4 xv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool in = col + 64 * h < p.k;
      if constexpr (kStage == 2) {
        const uint8_t* sx = staged + blocks * 8 * 4;  // [tokens][pitch] activations
        xv[h] = in && token ? *reinterpret_cast<const uint4*>(sx + g * q8_staged_pitch(p.k) + col + 64 * h)
                            : make_uint4(0, 0, 0, 0);
      } else {
        xv[h] = in && token ? load_dependent<kPdl>(reinterpret_cast<const uint4*>(xg + col + 64 * h))
                            : make_uint4(0, 0, 0, 0);
      }
    }
    float part_sum[4];
    block_mma(wl, wh, xv, part_sum);
    float sc0, sc1;
    if constexpr (kStage >= 1) {
      const float2 sp = *reinterpret_cast<const float2*>(reinterpret_cast<const float*>(staged) + kb * 8 + 2 * c);
      sc0 = sp.x;
      sc1 = sp.y;
    } else {
      const float ws = __ldg(w_scales + kb);
      const float* xsc = p.x_scales + static_cast<int64_t>(kb) * p.x_scale_ld;
      sc0 = t0 ? ws * load_dependent<kPdl>(xsc + 2 * c) : 0.0f;
      sc1 = t1 ? ws * load_dependent<kPdl>(xsc + 2 * c + 1) : 0.0f;
    }
    scale_into(part_sum, sc0, sc1, sum);
  }

  // One block's FP8 products summed by four mma (weights wl / wh, activations xv) into part_sum.
  __device__ static void block_mma(const uint4 (&wl)[2], const uint4 (&wh)[2], const uint4 (&xv)[2],
                                   float (&part_sum)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) part_sum[i] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t lo[4] = {wl[h].x, wl[h].y, wl[h].z, wl[h].w};
      const uint32_t hi[4] = {wh[h].x, wh[h].y, wh[h].z, wh[h].w};
      const uint32_t xs[4] = {xv[h].x, xv[h].y, xv[h].z, xv[h].w};
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t af[4] = {lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]};
        mma_fp8_16832(part_sum, af, xs[2 * j], xs[2 * j + 1]);
      }
    }
  }
  // The block's partial scaled by sc0 / sc1 (weight scale x the scale of token 2c / 2c + 1; 0 for
  // absent tokens) into its running sum.
  __device__ static void scale_into(const float (&part_sum)[4], float sc0, float sc1, float (&sum)[4]) {
    sum[0] = fmaf(part_sum[0], sc0, sum[0]);
    sum[1] = fmaf(part_sum[1], sc1, sum[1]);
    sum[2] = fmaf(part_sum[2], sc0, sum[2]);
    sum[3] = fmaf(part_sum[3], sc1, sum[3]);
  }

  // Warp `warp`'s sums acc[j] (sum warp + j * kWarps) through red, added in order, BF16 out.
  template <int kWarps, int kAccs>
  __device__ void finish(const float (&acc)[kAccs][4], float (*red)[16][8], int warp) const {
#pragma unroll
    for (int j = 0; j < kAccs; ++j) store_gemv_fragment(red, warp + j * kWarps, g, c, acc[j]);
    __syncthreads();
    store_gemv_tile_sums<16>(red, p.y, p.ldy, row0, p.n, p.tokens);
  }
};

// kUnroll: 128-column blocks in flight per warp; kMinBlocks: resident blocks an SM the register
// budget is cut for (launch bounds).
template <int kWarps, int kUnroll, int kMinBlocks, int kStage, bool kPdl>
__global__ void __launch_bounds__(kWarps * kWarpSize, kMinBlocks) fp8_gemv_q8_kernel(const GemvQ8Args a) {
  if constexpr (kPdl) pdl_launch_dependents();
  constexpr int kSums = 16, kAccs = kSums / kWarps;  // running sums, those of one warp
  static_assert(kSums % kWarps == 0 && kUnroll % kAccs == 0, "block kb's sum must be a constant u % kAccs");
  __shared__ float red[kSums][16][8];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const Q8Tile<kPdl> t(a, static_cast<int>(blockIdx.x), lane);
  extern __shared__ __align__(16) uint8_t staged[];

  float acc[kAccs][4] = {};
  // Every warp runs round 0 (its loads predicated off past k: the staging's barrier needs all of
  // them), then the rounds it has blocks for.
  for (int round = 0;; ++round) {
    const int b0 = warp + round * kWarps * kUnroll;
    if (round > 0 && b0 >= t.blocks) break;
    uint4 wl[kUnroll][2], wh[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int col = (b0 + u * kWarps) * 128 + t.c * 16;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // k is a multiple of 16: a lane's 16 columns are all in or all out
        const bool in = col + 64 * h < t.p.k;
        wl[u][h] = in && t.row_lo ? __ldcs(reinterpret_cast<const uint4*>(t.w_lo + col + 64 * h)) : make_uint4(0, 0, 0, 0);
        wh[u][h] = in && t.row_hi ? __ldcs(reinterpret_cast<const uint4*>(t.w_hi + col + 64 * h)) : make_uint4(0, 0, 0, 0);
      }
    }
    if (round == 0) {  // its weight loads in flight
      if constexpr (kPdl) pdl_wait();
      t.template stage<kStage, kWarps * kWarpSize>(staged);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = b0 + u * kWarps;
      if (kb >= t.blocks) break;  // warp-uniform
      // kb = warp + kWarps (round * kUnroll + u): sum kb % 16 is this warp's accumulator u % kAccs.
      t.template accumulate<kStage>(kb, wl[u], wh[u], staged, acc[u % kAccs]);
    }
  }
  t.template finish<kWarps, kAccs>(acc, red, warp);
}

}  // namespace hymoe::gpu::kernels
