// MLA decode attention on tensor cores (mma.sync m16n8k16 BF16 -> FP32, sm_80 and later, so both
// sm_90 and sm_120). Same blocks, splits and workspace as mla_decode.cuh (the combine kernel is
// shared): block = (split, 16-head group, sequence), 256 threads, 64-token tiles.
//   scores  S[16 heads][64 tokens] = Q[16][576] K^T: warp w owns tokens 8w..8w+7 (36 k-steps)
//   softmax warp w owns heads 2w, 2w+1 (lanes over tokens), P stored as BF16
//   values  O[16][512] += P[16][64] V[64][512]: warp w owns dimensions 64w..64w+63 (8 n-blocks)
// Fragment layouts (PTX ISA, m16n8k16): g = lane / 4, c = lane % 4;
//   A regs: (row g, k 2c..2c+1), (row g+8, k 2c..), (row g, k 2c+8..), (row g+8, k 2c+8..)
//   B regs: (k 2c..2c+1, col g), (k 2c+8..2c+9, col g)
//   C regs: (row g, col 2c), (row g, col 2c+1), (row g+8, col 2c), (row g+8, col 2c+1)
// Shared-memory rows are padded so the fragment loads of a warp hit 32 different banks.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/mla_decode.h"

namespace hymoe::gpu::kernels {

inline constexpr int kMmaTile = 64;                        // tokens per tile
inline constexpr int kMmaKStride = kMlaHeadDim / 2 + 4;    // 292 words per cache row
inline constexpr int kMmaQStride = kMlaHeadDim / 2 + 4;    // 292 words per query row
inline constexpr int kMmaSStride = kMmaTile + 1;           // floats per score row
inline constexpr int kMmaPStride = kMmaTile / 2 + 4;       // 36 words per probability row
inline constexpr size_t kMmaSmemBytes =
    sizeof(uint32_t) * (kMmaTile * kMmaKStride + 16 * kMmaQStride + 16 * kMmaPStride) +
    sizeof(float) * (16 * kMmaSStride + 16);
static_assert(kMmaKStride * 4 % 16 == 0, "cache rows stay 16-byte aligned for uint4 stores");

__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(256) mla_decode_mma_kernel(MlaDecodeParams p, int chunk) {
  extern __shared__ uint32_t smem[];
  uint32_t* k_s = smem;                                // [64][292] words
  uint32_t* q_s = k_s + kMmaTile * kMmaKStride;        // [16][292] words
  uint32_t* p_s = q_s + 16 * kMmaQStride;              // [16][36] words (BF16 pairs)
  float* s_s = reinterpret_cast<float*>(p_s + 16 * kMmaPStride);  // [16][65]
  float* alpha_s = s_s + 16 * kMmaSStride;             // [16]
  const uint16_t* k_h = reinterpret_cast<const uint16_t*>(k_s);

  const int split = blockIdx.x, h0 = blockIdx.y * 16, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int g = lane / 4, c = lane % 4;
  const int len = p.seq_lens[b];
  const int start = split * chunk, end = min(len, start + chunk);
  const int splits = gridDim.x;

  const auto* q = reinterpret_cast<const uint4*>(p.q + (static_cast<int64_t>(b) * p.heads + h0) * kMlaHeadDim);
  for (int v = tid; v < 16 * (kMlaHeadDim / 8); v += 256) {
    const int r = v / (kMlaHeadDim / 8), col = v % (kMlaHeadDim / 8);
    *reinterpret_cast<uint4*>(q_s + r * kMmaQStride + col * 4) = q[v];
  }
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // heads 2*warp + j
  float acc[8][4] = {};                                      // 8 n-blocks of 8 dims
  const auto* cache = reinterpret_cast<const uint4*>(p.kv_cache);
  const int32_t* table = p.block_table + static_cast<int64_t>(b) * p.max_blocks;

  for (int tile = start; tile < end; tile += kMmaTile) {
    __syncthreads();
    for (int v = tid; v < kMmaTile * (kMlaHeadDim / 8); v += 256) {
      const int t = v / (kMlaHeadDim / 8), col = v % (kMlaHeadDim / 8);
      const int token = tile + t;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (token < end) {
        const int64_t row = static_cast<int64_t>(table[token / p.block_size]) * p.block_size +
                            token % p.block_size;
        x = cache[row * (kMlaHeadDim / 8) + col];
      }
      *reinterpret_cast<uint4*>(k_s + t * kMmaKStride + col * 4) = x;
    }
    __syncthreads();

    // Scores of the 16 heads against tokens 8w..8w+7.
    {
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const uint32_t* qa = q_s + g * kMmaQStride + c;
      const uint32_t* qb = qa + 8 * kMmaQStride;
      const uint32_t* kb = k_s + (warp * 8 + g) * kMmaKStride + c;
#pragma unroll 4
      for (int ks = 0; ks < kMlaHeadDim / 16; ++ks) {
        mma_16816(d, qa[ks * 8], qb[ks * 8], qa[ks * 8 + 4], qb[ks * 8 + 4], kb[ks * 8], kb[ks * 8 + 4]);
      }
      const int t0 = warp * 8 + 2 * c;
      const bool v0 = tile + t0 < end, v1 = tile + t0 + 1 < end;
      s_s[g * kMmaSStride + t0] = v0 ? d[0] * scale_log2 : -INFINITY;
      s_s[g * kMmaSStride + t0 + 1] = v1 ? d[1] * scale_log2 : -INFINITY;
      s_s[(g + 8) * kMmaSStride + t0] = v0 ? d[2] * scale_log2 : -INFINITY;
      s_s[(g + 8) * kMmaSStride + t0 + 1] = v1 ? d[3] * scale_log2 : -INFINITY;
    }
    __syncthreads();

    // Online softmax of heads 2w, 2w+1 over the tile's 64 tokens (lanes take t and t+32).
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int h = 2 * warp + j;
      const float s0 = s_s[h * kMmaSStride + lane], s1 = s_s[h * kMmaSStride + lane + 32];
      const float m_new = fmaxf(m[j], warp_max(fmaxf(s0, s1)));  // finite: token `tile` is valid
      const float alpha = exp2f(m[j] - m_new);
      const float p0 = exp2f(s0 - m_new), p1 = exp2f(s1 - m_new);  // exp2f(-inf) = 0
      l[j] = l[j] * alpha + warp_sum(p0 + p1);
      m[j] = m_new;
      auto* ph = reinterpret_cast<uint16_t*>(p_s + h * kMmaPStride);
      ph[lane] = float_to_bf16_bits(p0);
      ph[lane + 32] = float_to_bf16_bits(p1);
      if (lane == 0) alpha_s[h] = alpha;
    }
    __syncthreads();

    // O[:, 64w .. 64w+63] = alpha * O + P V.
    const float al = alpha_s[g], ah = alpha_s[g + 8];
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) {
      acc[nb][0] *= al;
      acc[nb][1] *= al;
      acc[nb][2] *= ah;
      acc[nb][3] *= ah;
    }
    const uint32_t* pa = p_s + g * kMmaPStride + c;
    const uint32_t* pb = pa + 8 * kMmaPStride;
#pragma unroll
    for (int ks = 0; ks < kMmaTile / 16; ++ks) {
      const uint32_t a0 = pa[ks * 8], a1 = pb[ks * 8], a2 = pa[ks * 8 + 4], a3 = pb[ks * 8 + 4];
      const int t0 = ks * 16 + 2 * c;  // tokens of b0: t0, t0+1; of b1: t0+8, t0+9
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) {
        const int dim = warp * 64 + nb * 8 + g;
        const int row_halves = 2 * kMmaKStride;
        const uint32_t b0 = uint32_t{k_h[t0 * row_halves + dim]} |
                            (uint32_t{k_h[(t0 + 1) * row_halves + dim]} << 16);
        const uint32_t b1 = uint32_t{k_h[(t0 + 8) * row_halves + dim]} |
                            (uint32_t{k_h[(t0 + 9) * row_halves + dim]} << 16);
        mma_16816(acc[nb], a0, a1, a2, a3, b0, b1);
      }
    }
  }

  // Partials in mla_decode.cuh's workspace layout (the combine kernel is shared).
  const int64_t parts = static_cast<int64_t>(p.batch) * p.heads * splits;
  float* o_ws = p.workspace;
  float* ml_ws = p.workspace + parts * kMlaLatentDim;
  const int64_t part_lo = (static_cast<int64_t>(b) * p.heads + h0 + g) * splits + split;
  const int64_t part_hi = (static_cast<int64_t>(b) * p.heads + h0 + g + 8) * splits + split;
#pragma unroll
  for (int nb = 0; nb < 8; ++nb) {
    const int dim = warp * 64 + nb * 8 + 2 * c;
    *reinterpret_cast<float2*>(o_ws + part_lo * kMlaLatentDim + dim) = make_float2(acc[nb][0], acc[nb][1]);
    *reinterpret_cast<float2*>(o_ws + part_hi * kMlaLatentDim + dim) = make_float2(acc[nb][2], acc[nb][3]);
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t part = (static_cast<int64_t>(b) * p.heads + h0 + 2 * warp + j) * splits + split;
      ml_ws[part * 2] = m[j];
      ml_ws[part * 2 + 1] = l[j];
    }
  }
}

}  // namespace hymoe::gpu::kernels
