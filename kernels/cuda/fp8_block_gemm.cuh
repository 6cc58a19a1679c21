// Block-scaled FP8 GEMM on mma.sync (sm_89+: m16n8k32 E4M3 -> FP32), the fallback for shapes
// cuBLASLt refuses. D[m, n] = sum over 128-wide K blocks kb of
//   a_scale[kb][row] * b_scale[n / 128][kb] * (A[row, kb] . B[n, kb]),
// each block's FP8 products summed in FP32 by the tensor cores, then scaled and accumulated in
// FP32 registers (the promotion DeepSeek-V3's recipe asks for), BF16 output.
// Tile: 64 tokens x 128 outputs x 128 K per stage (one weight scale per tile and stage), 8 warps
// of 32 x 32, two cp.async stages. Rows past m or n and K past k are zero-filled by cp.async.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/moe.h"
#include "mma.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kBgM = 64, kBgN = 128, kBgK = 128;
inline constexpr int kBgThreads = 256;
inline constexpr int kBgStride = kBgK + 16;  // bytes per smem row: 36 words, conflict-free frags
inline constexpr int kBgStageBytes = (kBgM + kBgN) * kBgStride;
inline constexpr int kBgSmemBytes = 2 * kBgStageBytes;

// Stage kb's A [64 x 128] and B [128 x 128] tiles into smem (16-byte chunks, zero-filled outside).
__device__ __forceinline__ void bg_load_stage(const Fp8BlockGemmParams& p, uint8_t* stage, int m0,
                                              int n0, int kb, int tid) {
  const auto* a = reinterpret_cast<const uint8_t*>(p.a);
  const auto* b = reinterpret_cast<const uint8_t*>(p.b);
  uint8_t* as = stage;
  uint8_t* bs = stage + kBgM * kBgStride;
#pragma unroll
  for (int i = 0; i < kBgM * 8 / kBgThreads; ++i) {
    const int c = tid + i * kBgThreads, row = c / 8, col = (c % 8) * 16;
    const int gr = m0 + row, gk = kb * kBgK + col;
    const bool ok = gr < p.m && gk < p.k;
    cp_async16(as + row * kBgStride + col, ok ? a + gr * p.lda + gk : a, ok);
  }
#pragma unroll
  for (int i = 0; i < kBgN * 8 / kBgThreads; ++i) {
    const int c = tid + i * kBgThreads, row = c / 8, col = (c % 8) * 16;
    const int gr = n0 + row, gk = kb * kBgK + col;
    const bool ok = gr < p.n && gk < p.k;
    cp_async16(bs + row * kBgStride + col, ok ? b + gr * p.ldb + gk : b, ok);
  }
}

// One 64 x 128 output tile at (m0, n0).
__device__ __forceinline__ void fp8_block_gemm_tile(const Fp8BlockGemmParams& p, int m0, int n0,
                                                    uint8_t* bg_smem) {
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int wm = (warp / 4) * 32, wn = (warp % 4) * 32;
  const int kblocks = (p.k + kBgK - 1) / kBgK;
  const int a_row = (lane % 8) + ((lane / 8) & 1) * 8, a_colb = (lane / 16) * 16;
  const int b_row = (lane % 8) + (lane / 16) * 8, b_colb = ((lane / 8) & 1) * 16;

  // This thread's four output rows (per 16-row m tile: g and g + 8) and their scale validity.
  int rows[2][2];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
    rows[mi][0] = m0 + wm + mi * 16 + g;
    rows[mi][1] = rows[mi][0] + 8;
  }
  float acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;

  bg_load_stage(p, bg_smem, m0, n0, 0, tid);
  cp_async_commit();
  for (int kb = 0; kb < kblocks; ++kb) {
    if (kb + 1 < kblocks) bg_load_stage(p, bg_smem + ((kb + 1) & 1) * kBgStageBytes, m0, n0, kb + 1, tid);
    cp_async_commit();
    cp_async_wait<1>();  // stage kb has landed (the group just committed may still fly)
    __syncthreads();
    const uint8_t* as = bg_smem + (kb & 1) * kBgStageBytes;
    const uint8_t* bs = as + kBgM * kBgStride;
    float part[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) part[mi][ni][r] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kBgK; kk += 32) {
      // ldmatrix on byte pairs: an 8x8 b16 matrix is 8 rows x 16 FP8 codes, and a thread's
      // two b16 elements are the four codes the m16n8k32 fragment wants.
      uint32_t af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) ldmatrix_x4(af[mi], as + (wm + mi * 16 + a_row) * kBgStride + kk + a_colb);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t bb[4];
        ldmatrix_x4(bb, bs + (wn + np * 16 + b_row) * kBgStride + kk + b_colb);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          mma_fp8_16832(part[mi][2 * np], af[mi], bb[0], bb[1]);
          mma_fp8_16832(part[mi][2 * np + 1], af[mi], bb[2], bb[3]);
        }
      }
    }
    // Promote: one weight scale for the tile, one activation scale per row.
    const float ws = p.b_scale[static_cast<int64_t>(n0 / kBgN) * p.b_scale_ld + kb];
    const float* sa = p.a_scale + static_cast<int64_t>(kb) * p.a_scale_ld;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
      const float s0 = rows[mi][0] < p.m ? sa[rows[mi][0]] * ws : 0.0f;
      const float s1 = rows[mi][1] < p.m ? sa[rows[mi][1]] * ws : 0.0f;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        acc[mi][ni][0] += part[mi][ni][0] * s0;
        acc[mi][ni][1] += part[mi][ni][1] * s0;
        acc[mi][ni][2] += part[mi][ni][2] * s1;
        acc[mi][ni][3] += part[mi][ni][3] * s1;
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  auto* d = reinterpret_cast<uint16_t*>(p.d);
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rows[mi][h];
      if (row >= p.m) continue;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int col = n0 + wn + ni * 8 + t * 2;
        if (col < p.n) d[row * p.ldd + col] = float_to_bf16_bits(acc[mi][ni][2 * h]);
        if (col + 1 < p.n) d[row * p.ldd + col + 1] = float_to_bf16_bits(acc[mi][ni][2 * h + 1]);
      }
    }
}

__global__ void __launch_bounds__(kBgThreads) fp8_block_gemm_kernel(Fp8BlockGemmParams p) {
  extern __shared__ __align__(16) uint8_t bg_smem[];
  fp8_block_gemm_tile(p, blockIdx.y * kBgM, blockIdx.x * kBgN, bg_smem);
}

// Expert e's rows of a grouped GEMM as one dense GEMM (rows past them belong to the next expert:
// p.m stops the loads and stores there).
__device__ __forceinline__ void grouped_expert_params(const GroupedGemmParams& gp, int e,
                                                      Fp8BlockGemmParams& p) {
  const int off = gp.offsets[e], rows = gp.offsets[e + 1] - off;
  const int col_blocks = (gp.k + 127) / 128;
  p.a = gp.a + static_cast<int64_t>(off) * gp.k;
  p.a_scale = gp.a_scales + grouped_scale_offset(col_blocks, off, e);
  p.b = gp.weights[e].w;
  p.b_scale = gp.weights[e].scales;
  p.d = gp.d + static_cast<int64_t>(off) * gp.ldd;
  p.m = rows;
  p.n = gp.n;
  p.k = gp.k;
  p.lda = p.ldb = gp.k;
  p.ldd = gp.ldd;
  p.a_scale_ld = rows;
  p.b_scale_ld = gp.b_scale_ld;
}

// Grouped launches: blockIdx.y enumerates the TileM-row tiles of every expert in expert order.
// Finds this block's expert and tile from the device offsets (thread 0, shared through smem) and
// describes the expert's GEMM in p; returns the tile's first row, or -1 when the block has none.
template <int TileM>
__device__ __forceinline__ int grouped_tile(const GroupedGemmParams& gp, Fp8BlockGemmParams& p) {
  __shared__ int s_expert, s_tile;
  if (threadIdx.x == 0) {
    int first = 0, e = 0;
    const int y = blockIdx.y;
    for (; e < gp.experts; ++e) {
      const int tiles = (gp.offsets[e + 1] - gp.offsets[e] + TileM - 1) / TileM;
      if (y < first + tiles) break;
      first += tiles;
    }
    s_expert = e;
    s_tile = y - first;
  }
  __syncthreads();
  const int e = s_expert;
  if (e >= gp.experts) return -1;  // (the host sizes the grid exactly; kept for safety)
  grouped_expert_params(gp, e, p);
  return s_tile * TileM;
}

// Grouped: each block runs one 64-row tile of one expert's rows against that expert's weight.
__global__ void __launch_bounds__(kBgThreads) fp8_grouped_gemm_kernel(GroupedGemmParams gp) {
  extern __shared__ __align__(16) uint8_t bg_smem[];
  Fp8BlockGemmParams p;
  const int m0 = grouped_tile<kBgM>(gp, p);
  if (m0 < 0) return;
  fp8_block_gemm_tile(p, m0, blockIdx.x * kBgN, bg_smem);
}

}  // namespace hymoe::gpu::kernels
