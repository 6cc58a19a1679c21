// MLA decode attention on tensor cores (mma.sync m16n8k16 BF16 -> FP32 with ldmatrix fragment
// loads, sm_80 and later, so both sm_90 and sm_120). The splits, workspace and combine kernel are
// mla_decode.cuh's. All heads of a sequence share its latent cache, so a block takes 64 heads
// (M = 64) against each cache tile: the cache is read once per 64 heads, not once per 16.
// Block = (64-head group, split, sequence), 256 threads (8 warps), 32-token tiles streamed by
// cp.async into two stages while the previous tile is being used.
//   scores  S[64][32] = Q[64][576] K^T     warp w: heads 16(w/2).., tokens 16(w%2).. (2 n-tiles)
//   softmax warp w: heads 8w..8w+7, lanes over the 32 tokens (log2 domain, online)
//   values  O[64][512] += P[64][32] V[32][512]  warp w: heads 16(w/2).., dims 256(w%2).. (32 n-tiles)
// Fragment layouts and ldmatrix: mma.cuh.
// Shared rows are padded by 16 bytes so the 8 row addresses of a matrix hit different banks.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/mla_decode.h"
#include "mla_split_work.cuh"
#include "mma.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kMmaHeads = 64;                          // heads per block
inline constexpr int kMmaTile = 32;                           // tokens per tile
inline constexpr int kMmaRowBytes = kMlaHeadDim * 2 + 16;     // 1168: Q and cache rows
inline constexpr int kMmaSStride = kMmaTile + 1;              // floats per score row
inline constexpr int kMmaPRowBytes = kMmaTile * 2 + 16;       // 80: P rows (BF16)
inline constexpr int kMmaQBytes = kMmaHeads * kMmaRowBytes;
inline constexpr int kMmaStageBytes = kMmaTile * kMmaRowBytes;
inline constexpr size_t kMmaSmemBytes = size_t{kMmaQBytes} + 2 * kMmaStageBytes +
                                        kMmaHeads * kMmaPRowBytes +
                                        sizeof(float) * (kMmaHeads * kMmaSStride + kMmaHeads);

// Stage the cache rows of tokens [tile, tile + 32) (zeros past `end`) into `stage`: thread t
// copies token t / 8 (one block-table lookup), 16-byte columns t % 8 + 8 j.
__device__ __forceinline__ void mla_load_tile(const MlaDecodeParams& p, const int32_t* table,
                                              uint8_t* stage, int tile, int end, int tid) {
  static_assert(kMmaTile * 8 == 256, "8 threads per cache row");
  constexpr int kChunks = kMlaHeadDim * 2 / 16;  // 72 per row
  const int t = tid / 8, col0 = tid % 8, token = tile + t;
  const bool ok = token < end;
  const auto* src = reinterpret_cast<const uint8_t*>(p.kv_cache);
  if (ok) {
    const int64_t row =
        static_cast<int64_t>(table[token / p.block_size]) * p.block_size + token % p.block_size;
    src += row * (kMlaHeadDim * 2);
  }
  uint8_t* dst = stage + t * kMmaRowBytes;
#pragma unroll
  for (int j = 0; j < kChunks / 8; ++j) {
    const int col = col0 + 8 * j;
    cp_async16(dst + col * 16, src + (ok ? col * 16 : 0), ok);
  }
}

__global__ void __launch_bounds__(256, 1) mla_decode_mma_kernel(MlaDecodeParams p, int chunk) {
  extern __shared__ __align__(16) uint8_t mla_smem[];
  uint8_t* q_s = mla_smem;                                  // [64][1168 B]
  uint8_t* k_s = q_s + kMmaQBytes;                          // 2 x [32][1168 B]
  uint8_t* p_s = k_s + 2 * kMmaStageBytes;                  // [64][80 B] BF16 probabilities
  float* s_s = reinterpret_cast<float*>(p_s + kMmaHeads * kMmaPRowBytes);  // [64][33]
  float* alpha_s = s_s + kMmaHeads * kMmaSStride;           // [64]

  const int h0 = blockIdx.x * kMmaHeads, splits = gridDim.y;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int g = lane / 4, c = lane % 4;
  const int wm = (warp / 2) * 16;  // this warp's 16 heads (scores and values)
  const int wn = warp % 2;         // score tokens 16 wn.., value dims 256 wn..
  const MlaSplitWork work = mla_split_work(p, chunk, blockIdx.y, blockIdx.z, splits);
  if (work.b < 0) return;
  const int b = work.b, start = work.start, end = work.end;
  const int32_t* table = p.block_table + static_cast<int64_t>(b) * p.max_blocks;

  // Q rows of this head group (zeros for heads past p.heads), then the first tile.
  {
    constexpr int kChunks = kMlaHeadDim * 2 / 16;
    const auto* q = reinterpret_cast<const uint8_t*>(p.q + static_cast<int64_t>(b) * p.heads * kMlaHeadDim);
    for (int v = tid; v < kMmaHeads * kChunks; v += 256) {
      const int r = v / kChunks, col = v % kChunks;
      const bool ok = h0 + r < p.heads;
      cp_async16(q_s + r * kMmaRowBytes + col * 16,
                     ok ? q + (static_cast<int64_t>(h0 + r) * kMlaHeadDim * 2 + col * 16) : q, ok);
    }
  }
  if (start < end) mla_load_tile(p, table, k_s, start, end, tid);
  cp_async_commit();

  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  float m_run[8], l_run[8];  // softmax state of heads 8 warp + j (same in every lane)
#pragma unroll
  for (int j = 0; j < 8; ++j) { m_run[j] = -INFINITY; l_run[j] = 0.0f; }
  float acc[32][4];
#pragma unroll
  for (int nb = 0; nb < 32; ++nb)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[nb][r] = 0.0f;

  // ldmatrix row addresses (lane-dependent parts).
  const int a_row = (lane % 8) + ((lane / 8) & 1) * 8, a_col = (lane / 16) * 8;  // A: x4
  const int b_row = (lane % 8) + (lane / 16) * 8, b_col = ((lane / 8) & 1) * 8;  // B: 2 n-tiles
  const int v_row = (lane % 8) + ((lane / 8) & 1) * 8, v_col = (lane / 16) * 8;  // V (trans)

  int it = 0;
  for (int tile = start; tile < end; tile += kMmaTile, ++it) {
    uint8_t* stage = k_s + (it & 1) * kMmaStageBytes;
    if (tile + kMmaTile < end)
      mla_load_tile(p, table, k_s + ((it + 1) & 1) * kMmaStageBytes, tile + kMmaTile, end, tid);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    // Scores: heads wm..wm+15 x tokens 16 wn .. 16 wn + 15 (two n-tiles of 8), K = 576.
    {
      float d[2][4] = {};
      const uint8_t* qa = q_s + (wm + a_row) * kMmaRowBytes + a_col * 2;
      const uint8_t* kb = stage + (wn * 16 + b_row) * kMmaRowBytes + b_col * 2;
#pragma unroll 4
      for (int ks = 0; ks < kMlaHeadDim / 16; ++ks) {
        uint32_t a[4], bb[4];
        ldmatrix_x4(a, qa + ks * 32);
        ldmatrix_x4(bb, kb + ks * 32);
        mma_16816(d[0], a[0], a[1], a[2], a[3], bb[0], bb[1]);
        mma_16816(d[1], a[0], a[1], a[2], a[3], bb[2], bb[3]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int t0 = wn * 16 + nt * 8 + 2 * c;
        const bool v0 = tile + t0 < end, v1 = tile + t0 + 1 < end;
        s_s[(wm + g) * kMmaSStride + t0] = v0 ? d[nt][0] * scale_log2 : -INFINITY;
        s_s[(wm + g) * kMmaSStride + t0 + 1] = v1 ? d[nt][1] * scale_log2 : -INFINITY;
        s_s[(wm + g + 8) * kMmaSStride + t0] = v0 ? d[nt][2] * scale_log2 : -INFINITY;
        s_s[(wm + g + 8) * kMmaSStride + t0 + 1] = v1 ? d[nt][3] * scale_log2 : -INFINITY;
      }
    }
    __syncthreads();

    // Online softmax of heads 8 warp .. 8 warp + 7, one token per lane.
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int h = 8 * warp + j;
      const float s = s_s[h * kMmaSStride + lane];
      const float m_new = fmaxf(m_run[j], warp_max(s));  // finite: token `tile` is valid
      const float alpha = fast_exp2(m_run[j] - m_new);
      const float pr = fast_exp2(s - m_new);             // 2^-inf = 0
      l_run[j] = l_run[j] * alpha + warp_sum(pr);
      m_run[j] = m_new;
      reinterpret_cast<uint16_t*>(p_s + h * kMmaPRowBytes)[lane] = float_to_bf16_bits(pr);
      if (lane == 0) alpha_s[h] = alpha;
    }
    __syncthreads();

    // O[wm.., 256 wn ..] = alpha O + P V over the tile's 32 tokens (two k-steps of 16).
    const float al = alpha_s[wm + g], ah = alpha_s[wm + g + 8];
#pragma unroll
    for (int nb = 0; nb < 32; ++nb) {
      acc[nb][0] *= al;
      acc[nb][1] *= al;
      acc[nb][2] *= ah;
      acc[nb][3] *= ah;
    }
#pragma unroll
    for (int ks = 0; ks < kMmaTile / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, p_s + (wm + a_row) * kMmaPRowBytes + (ks * 16 + a_col) * 2);
      const uint8_t* vb = stage + (ks * 16 + v_row) * kMmaRowBytes + (wn * 256 + v_col) * 2;
#pragma unroll
      for (int np = 0; np < 16; ++np) {  // pairs of n-tiles: dims 256 wn + 16 np ..
        uint32_t bb[4];
        ldmatrix_x4_trans(bb, vb + np * 32);
        mma_16816(acc[2 * np], a[0], a[1], a[2], a[3], bb[0], bb[1]);
        mma_16816(acc[2 * np + 1], a[0], a[1], a[2], a[3], bb[2], bb[3]);
      }
    }
    __syncthreads();  // the next iteration refills the other stage and rewrites s_s / p_s
  }
  cp_async_wait<0>();

  // Partials in mla_decode.cuh's workspace layout (the combine kernel is shared).
  const int64_t parts = static_cast<int64_t>(p.batch) * p.heads * splits;
  float* o_ws = p.workspace;
  float* ml_ws = p.workspace + parts * kMlaLatentDim;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int h = h0 + wm + g + 8 * half;
    if (h >= p.heads) continue;
    const int64_t part = mla_part(p, h, work.item, splits);
#pragma unroll
    for (int nb = 0; nb < 32; ++nb) {
      const int dim = wn * 256 + nb * 8 + 2 * c;
      *reinterpret_cast<float2*>(o_ws + part * kMlaLatentDim + dim) =
          make_float2(acc[nb][2 * half], acc[nb][2 * half + 1]);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int h = h0 + 8 * warp + j;
      if (h >= p.heads) continue;
      const int64_t part = mla_part(p, h, work.item, splits);
      ml_ws[part * 2] = m_run[j];
      ml_ws[part * 2 + 1] = l_run[j];
    }
  }
}

}  // namespace hymoe::gpu::kernels
