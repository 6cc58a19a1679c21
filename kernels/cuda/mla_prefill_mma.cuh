// MLA prefill attention on tensor cores, flash-attention-2 style (mma.sync m16n8k16 BF16 -> FP32,
// ldmatrix fragments, sm_80 and later). Block = (64-query tile, head), 4 warps of 16 queries;
// 64-key tiles of K = [k_nope[h] | k_pe] (192) and V[h] (128) streamed by cp.async into two
// stages. Per warp and key tile:
//   S[16][64] = Q K^T (Q fragments held in registers for the whole block: 12 k-steps),
//   causal/length mask, online softmax in the log2 domain on the S fragments themselves,
//   O[16][128] += P V with P re-packed from S's accumulator layout into A fragments (no smem).
// Query tiles are issued longest first (the causal triangle makes late tiles the heaviest).
// Fragment layouts: mma.cuh (g = lane / 4, c = lane % 4).
#pragma once

#include "common.cuh"
#include "hymoe/gpu/mla_prefill.h"
#include "mma.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kPfQ = 64;                          // queries per block
inline constexpr int kPfK = 64;                          // keys per tile
inline constexpr int kPfThreads = 128;
inline constexpr int kPfKRow = kMlaQkDim * 2 + 16;       // 400 bytes: Q and K rows
inline constexpr int kPfVRow = kMlaVDim * 2 + 16;        // 272 bytes: V rows
inline constexpr int kPfStage = kPfK * (kPfKRow + kPfVRow);
inline constexpr int kPfSmemBytes = kPfQ * kPfKRow + 2 * kPfStage;

// Stage keys [k0, k0 + 64) (zeros past kv_tokens). Each thread owns fixed 16-byte columns and
// walks keys with a constant pointer step: k_nope and v 16 columns (thread t: column t % 16, keys
// t / 16 + 8 j), k_pe 8 columns (column t % 8, keys t / 8 + 16 j).
__device__ __forceinline__ void pf_load_kv(const MlaPrefillParams& p, uint8_t* stage, int h,
                                           int k0, int tid) {
  uint8_t* ks = stage;
  uint8_t* vs = stage + kPfK * kPfKRow;
  {
    const int col = tid % 16, r0 = tid / 16;
    const int64_t head_off = int64_t{h} * p.k_head_stride * 2 + col * 16;
    const int64_t vhead_off = int64_t{h} * p.v_head_stride * 2 + col * 16;
    const auto* kn = reinterpret_cast<const uint8_t*>(p.k_nope) + head_off;
    const auto* vv = reinterpret_cast<const uint8_t*>(p.v) + vhead_off;
#pragma unroll
    for (int j = 0; j < kPfK / 8; ++j) {
      const int row = r0 + 8 * j, key = k0 + row;
      const bool ok = key < p.kv_tokens;
      const int64_t kk = ok ? key : 0;
      cp_async16(ks + row * kPfKRow + col * 16, kn + kk * p.k_token_stride * 2, ok);
      cp_async16(vs + row * kPfVRow + col * 16, vv + kk * p.v_token_stride * 2, ok);
    }
  }
  {
    const int col = tid % 8, r0 = tid / 8;
    const auto* kp =
        reinterpret_cast<const uint8_t*>(p.k_pe) + int64_t{h} * p.k_pe_head_stride * 2 + col * 16;
#pragma unroll
    for (int j = 0; j < kPfK / 16; ++j) {
      const int row = r0 + 16 * j, key = k0 + row;
      const bool ok = key < p.kv_tokens;
      cp_async16(ks + row * kPfKRow + 256 + col * 16, kp + (ok ? int64_t{key} : 0) * p.k_pe_token_stride * 2, ok);
    }
  }
}

__global__ void __launch_bounds__(kPfThreads, 2) mla_prefill_mma_kernel(MlaPrefillParams p) {
  extern __shared__ __align__(16) uint8_t pf_smem[];
  uint8_t* q_s = pf_smem;
  uint8_t* kv_s = pf_smem + kPfQ * kPfKRow;
  const int tiles = (p.tokens + kPfQ - 1) / kPfQ;
  const int q0 = (tiles - 1 - static_cast<int>(blockIdx.x)) * kPfQ;  // heaviest tiles first
  const int h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int g = lane / 4, c = lane % 4;

  // Q tile (rows past `tokens` zero-filled) and the first key tile.
  {
    const auto* q = reinterpret_cast<const uint8_t*>(p.q);
    for (int i = tid; i < kPfQ * 24; i += kPfThreads) {
      const int row = i / 24, col = i % 24, t = q0 + row;
      const bool ok = t < p.tokens;
      cp_async16(q_s + row * kPfKRow + col * 16,
                     q + ((ok ? int64_t{t} : 0) * p.q_token_stride + int64_t{h} * p.q_head_stride) * 2 + col * 16,
                     ok);
    }
  }
  // Keys this tile can see: up to the causal limit of its last query, within kv_tokens.
  const int key_end = min(p.kv_tokens, p.past + min(q0 + kPfQ, p.tokens));
  pf_load_kv(p, kv_s, h, 0, tid);
  cp_async_commit();

  const int a_row = (lane % 8) + ((lane / 8) & 1) * 8, a_col = (lane / 16) * 8;
  const int b_row = (lane % 8) + (lane / 16) * 8, b_col = ((lane / 8) & 1) * 8;
  const int v_row = (lane % 8) + ((lane / 8) & 1) * 8, v_col = (lane / 16) * 8;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  // This thread's two query positions (rows g and g + 8 of the warp's 16).
  const int pos0 = p.past + q0 + warp * 16 + g, pos1 = pos0 + 8;

  uint32_t qf[kMlaQkDim / 16][4];
  float o[kMlaVDim / 8][4];
#pragma unroll
  for (int nb = 0; nb < kMlaVDim / 8; ++nb)
#pragma unroll
    for (int r = 0; r < 4; ++r) o[nb][r] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  int it = 0;
  for (int k0 = 0; k0 < key_end; k0 += kPfK, ++it) {
    uint8_t* stage = kv_s + (it & 1) * kPfStage;
    if (k0 + kPfK < key_end) pf_load_kv(p, kv_s + ((it + 1) & 1) * kPfStage, h, k0 + kPfK, tid);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int ks = 0; ks < kMlaQkDim / 16; ++ks)
        ldmatrix_x4(qf[ks], q_s + (warp * 16 + a_row) * kPfKRow + (ks * 16 + a_col) * 2);
    }
    // S = Q K^T: 8 n-tiles of 8 keys.
    float s[kPfK / 8][4];
#pragma unroll
    for (int nt = 0; nt < kPfK / 8; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) s[nt][r] = 0.0f;
    const uint8_t* ks_base = stage + b_row * kPfKRow + b_col * 2;
#pragma unroll
    for (int ks = 0; ks < kMlaQkDim / 16; ++ks) {
#pragma unroll
      for (int np = 0; np < kPfK / 16; ++np) {
        uint32_t bb[4];
        ldmatrix_x4(bb, ks_base + np * 16 * kPfKRow + ks * 32);
        mma_16816(s[2 * np], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], bb[0], bb[1]);
        mma_16816(s[2 * np + 1], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], bb[2], bb[3]);
      }
    }
    // Mask (causal and kv length) only where the tile reaches past a row's limit. Maxima are
    // taken over raw scores (the scale is positive) and scaled once.
    if (k0 + kPfK - 1 > min(pos0, p.kv_tokens - 1)) {
#pragma unroll
      for (int nt = 0; nt < kPfK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = k0 + nt * 8 + 2 * c + e;
          if (key > pos0 || key >= p.kv_tokens) s[nt][e] = -INFINITY;
          if (key > pos1 || key >= p.kv_tokens) s[nt][2 + e] = -INFINITY;
        }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kPfK / 8; ++nt) {
      mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
      mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // Running maxima in the log2 domain. A row with nothing visible yet keeps -inf; its shift is
    // then 0 so that the weights come out 0, not NaN.
    const float new0 = fmaxf(m0, mx0 * scale_log2), new1 = fmaxf(m1, mx1 * scale_log2);
    const float sh0 = new0 == -INFINITY ? 0.0f : new0, sh1 = new1 == -INFINITY ? 0.0f : new1;
    const float al0 = fast_exp2(m0 - sh0), al1 = fast_exp2(m1 - sh1);
    m0 = new0;
    m1 = new1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kPfK / 8; ++nt) {
      s[nt][0] = fast_exp2(fmaf(s[nt][0], scale_log2, -sh0));
      s[nt][1] = fast_exp2(fmaf(s[nt][1], scale_log2, -sh0));
      s[nt][2] = fast_exp2(fmaf(s[nt][2], scale_log2, -sh1));
      s[nt][3] = fast_exp2(fmaf(s[nt][3], scale_log2, -sh1));
      sum0 += s[nt][0] + s[nt][1];
      sum1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * al0 + sum0;  // per-thread partial sums; the 4 lanes of a row are added at the end
    l1 = l1 * al1 + sum1;
#pragma unroll
    for (int nb = 0; nb < kMlaVDim / 8; ++nb) {
      o[nb][0] *= al0;
      o[nb][1] *= al0;
      o[nb][2] *= al1;
      o[nb][3] *= al1;
    }
    // O += P V: k-step kk covers keys 16 kk.. (S n-tiles 2kk, 2kk+1).
    const uint8_t* vs = stage + kPfK * kPfKRow;
#pragma unroll
    for (int kk = 0; kk < kPfK / 16; ++kk) {
      const uint32_t a0 = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
      const uint32_t a1 = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
      const uint32_t a2 = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      const uint32_t a3 = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      const uint8_t* vb = vs + (kk * 16 + v_row) * kPfVRow + v_col * 2;
#pragma unroll
      for (int np = 0; np < kMlaVDim / 16; ++np) {
        uint32_t bb[4];
        ldmatrix_x4_trans(bb, vb + np * 32);
        mma_16816(o[2 * np], a0, a1, a2, a3, bb[0], bb[1]);
        mma_16816(o[2 * np + 1], a0, a1, a2, a3, bb[2], bb[3]);
      }
    }
    __syncthreads();  // the next iteration refills the other stage
  }
  cp_async_wait<0>();

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  const int t0 = q0 + warp * 16 + g, t1 = t0 + 8;
  if (p.lse != nullptr && c == 0) {  // m is in the log2 domain of the scaled scores
    constexpr float kLn2 = 0.6931471805599453f;
    if (t0 < p.tokens) p.lse[int64_t{h} * p.tokens + t0] = (m0 + log2f(l0)) * kLn2;
    if (t1 < p.tokens) p.lse[int64_t{h} * p.tokens + t1] = (m1 + log2f(l1)) * kLn2;
  }
  auto* out = reinterpret_cast<uint32_t*>(p.out);
#pragma unroll
  for (int nb = 0; nb < kMlaVDim / 8; ++nb) {
    const int dim = nb * 8 + 2 * c;
    if (t0 < p.tokens)
      out[(int64_t{t0} * p.out_token_stride + int64_t{h} * p.out_head_stride + dim) / 2] =
          pack_bf16x2(o[nb][0] * inv0, o[nb][1] * inv0);
    if (t1 < p.tokens)
      out[(int64_t{t1} * p.out_token_stride + int64_t{h} * p.out_head_stride + dim) / 2] =
          pack_bf16x2(o[nb][2] * inv1, o[nb][3] * inv1);
  }
}

}  // namespace hymoe::gpu::kernels
