// MLA prefill attention on CUDA cores. Block = (32-query tile, head), 256 threads. Per 32-key
// tile: keys ([k_nope | k_pe]) and values into shared memory, warp w scores queries 4w..4w+3
// against key `lane` and updates their online softmax (log2 domain), then every thread
// accumulates two value dimensions of eight queries.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/mla_prefill.h"

namespace hymoe::gpu::kernels {

inline constexpr int kPrefillTile = 32;
inline constexpr int kPrefillThreads = 256;
inline constexpr int kQkWords = kMlaQkDim / 2;    // 96
inline constexpr int kKStride = kQkWords + 1;     // odd: lanes reading different keys spread banks
inline constexpr int kVWords = kMlaVDim / 2;      // 64

__device__ __forceinline__ float2 bf16pair(uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

__device__ __forceinline__ void load_words(uint32_t* dst, const uint16_t* src, int words, bool valid) {
  // 16-byte loads; rows are 16-byte aligned (checked on the host).
  for (int i = 0; i < words / 4; ++i) {
    uint4 x = make_uint4(0, 0, 0, 0);
    if (valid) x = reinterpret_cast<const uint4*>(src)[i];
    dst[4 * i] = x.x; dst[4 * i + 1] = x.y; dst[4 * i + 2] = x.z; dst[4 * i + 3] = x.w;
  }
}

__global__ void __launch_bounds__(kPrefillThreads) mla_prefill_kernel(MlaPrefillParams p) {
  __shared__ uint32_t q_s[kPrefillTile][kQkWords];
  __shared__ uint32_t k_s[kPrefillTile][kKStride];
  __shared__ uint32_t v_s[kPrefillTile][kVWords];
  __shared__ float p_s[kPrefillTile][kPrefillTile];  // [query][key]
  __shared__ float alpha_s[kPrefillTile];
  __shared__ float l_s[kPrefillTile];
  const int q0 = blockIdx.x * kPrefillTile, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const auto* q = reinterpret_cast<const uint16_t*>(p.q);
  const auto* kn = reinterpret_cast<const uint16_t*>(p.k_nope);
  const auto* kp = reinterpret_cast<const uint16_t*>(p.k_pe);
  const auto* v = reinterpret_cast<const uint16_t*>(p.v);

  // Query tile: 32 rows of 192 (24 16-byte pieces each).
  for (int i = tid; i < kPrefillTile * 24; i += kPrefillThreads) {
    const int r = i / 24, c = i % 24;
    const bool valid = q0 + r < p.tokens;
    load_words(&q_s[r][c * 4], q + (q0 + r) * p.q_token_stride + h * p.q_head_stride + c * 8, 4, valid);
  }
  const int q_last = min(p.tokens, q0 + kPrefillTile) - 1;
  const int key_end = min(p.kv_tokens, p.past + q_last + 1);  // causal limit of the tile
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, l[4] = {0, 0, 0, 0};
  float acc[8][2] = {};
  const int dw = tid % kVWords, qb = (tid / kVWords) * 8;  // this thread's value word and queries

  for (int kt = 0; kt < key_end; kt += kPrefillTile) {
    __syncthreads();
    for (int i = tid; i < kPrefillTile * 40; i += kPrefillThreads) {  // 16 k_nope + 8 k_pe + 16 v pieces
      const int t = i / 40, c = i % 40, key = kt + t;
      const bool valid = key < key_end;
      if (c < 16) {
        load_words(&k_s[t][c * 4], kn + key * p.k_token_stride + h * p.k_head_stride + c * 8, 4, valid);
      } else if (c < 24) {
        load_words(&k_s[t][64 + (c - 16) * 4],
                   kp + key * p.k_pe_token_stride + h * p.k_pe_head_stride + (c - 16) * 8, 4, valid);
      } else {
        load_words(&v_s[t][(c - 24) * 4], v + key * p.v_token_stride + h * p.v_head_stride + (c - 24) * 8, 4, valid);
      }
    }
    __syncthreads();
    // Scores of queries 4w..4w+3 against key kt + lane.
    {
      float s[4] = {0, 0, 0, 0};
#pragma unroll 4
      for (int i = 0; i < kQkWords; ++i) {
        const float2 k2 = bf16pair(k_s[lane][i]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 q2 = bf16pair(q_s[4 * warp + j][i]);
          s[j] = fmaf(q2.x, k2.x, fmaf(q2.y, k2.y, s[j]));
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int qi = q0 + 4 * warp + j, key = kt + lane;
        const bool valid = qi < p.tokens && key < p.kv_tokens && key <= p.past + qi;
        const float sj = valid ? s[j] * scale_log2 : -INFINITY;
        const float m_new = fmaxf(m[j], warp_max(sj));
        const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m[j] - m_new);
        const float pj = valid ? exp2f(sj - m_new) : 0.0f;
        l[j] = l[j] * alpha + warp_sum(pj);
        m[j] = m_new;
        p_s[4 * warp + j][lane] = pj;
        if (lane == 0) alpha_s[4 * warp + j] = alpha;
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      acc[j][0] *= alpha_s[qb + j];
      acc[j][1] *= alpha_s[qb + j];
    }
    const int ntok = min(kPrefillTile, key_end - kt);
    for (int t = 0; t < ntok; ++t) {
      const float2 vv = bf16pair(v_s[t][dw]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float pj = p_s[qb + j][t];
        acc[j][0] = fmaf(pj, vv.x, acc[j][0]);
        acc[j][1] = fmaf(pj, vv.y, acc[j][1]);
      }
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      l_s[4 * warp + j] = l[j];
      const int qi = q0 + 4 * warp + j;
      if (p.lse != nullptr && qi < p.tokens)  // m is in the log2 domain of the scaled scores
        p.lse[int64_t{h} * p.tokens + qi] = (m[j] + log2f(l[j])) * 0.6931471805599453f;
    }
  }
  __syncthreads();
  auto* out = reinterpret_cast<uint16_t*>(p.out);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int qi = q0 + qb + j;
    if (qi >= p.tokens) continue;
    const float inv = 1.0f / l_s[qb + j];
    const uint32_t word = float_to_bf16_bits(acc[j][0] * inv) |
                          (uint32_t{float_to_bf16_bits(acc[j][1] * inv)} << 16);
    *reinterpret_cast<uint32_t*>(out + qi * p.out_token_stride + h * p.out_head_stride + 2 * dw) = word;
  }
}

}  // namespace hymoe::gpu::kernels
