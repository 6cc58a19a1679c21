// MLA decode attention (absorbed form) on CUDA cores, split-K over the sequence.
// Block = (split, 16-head group, sequence), 256 threads. Per 32-token tile: the tile's cache rows
// are gathered through the block table into shared memory (each row read once per head group),
// warp w scores heads 2w and 2w+1 (lane = token) and updates their online softmax, then every
// thread accumulates two latent dimensions for all 16 heads. Scores live in the log2 domain
// (exp2f). Partial (o, max, sum) per split go to the workspace; mla_combine merges them.
// NOTES: FP32 FMAs bound this kernel (~2 FLOP per cache byte per head); the tensor-core
// (mma.sync / wgmma) version is the next step for the bandwidth target.
#pragma once

#include "common.cuh"
#include "pdl.cuh"
#include "hymoe/gpu/mla_decode.h"
#include "hymoe/gpu/mla_decode_plan.h"
#include "mla_split_work.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kMlaHeadsPerBlock = 16;
inline constexpr int kMlaTile = 32;
inline constexpr int kMlaThreads = 256;
inline constexpr int kMlaWordsPerRow = kMlaHeadDim / 2;      // 288 bf16 pairs
inline constexpr int kMlaKStride = kMlaWordsPerRow + 1;      // odd word stride: no bank conflicts
inline constexpr size_t kMlaSmemBytes =
    sizeof(uint32_t) * (kMlaHeadsPerBlock * kMlaWordsPerRow + kMlaTile * kMlaKStride) +
    sizeof(float) * (kMlaTile * kMlaHeadsPerBlock + kMlaHeadsPerBlock);
static_assert(kMlaThreads * 2 == kMlaLatentDim, "each thread owns two latent dimensions");
static_assert(kMlaThreads / kWarpSize * 2 == kMlaHeadsPerBlock, "each warp scores two heads");

__device__ __forceinline__ float2 bf16x2_to_float2(uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

__global__ void __launch_bounds__(kMlaThreads) mla_decode_split_kernel(MlaDecodeParams p, int chunk) {
  extern __shared__ uint32_t smem[];
  uint32_t* q_s = smem;                                         // [16][288] words
  uint32_t* k_s = q_s + kMlaHeadsPerBlock * kMlaWordsPerRow;    // [32][289] words
  float* p_s = reinterpret_cast<float*>(k_s + kMlaTile * kMlaKStride);  // [32 tokens][16 heads]
  float* alpha_s = p_s + kMlaTile * kMlaHeadsPerBlock;          // [16]

  const int h0 = blockIdx.y * kMlaHeadsPerBlock, splits = gridDim.x;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const MlaSplitWork work = mla_split_work(p, chunk, blockIdx.x, blockIdx.z, splits);
  if (work.b < 0) return;
  const int b = work.b, start = work.start, end = work.end;

  // Queries of the 16 heads (16-byte loads; 72 per head).
  const auto* q = reinterpret_cast<const uint4*>(p.q + (static_cast<int64_t>(b) * p.heads + h0) * kMlaHeadDim);
  for (int v = tid; v < kMlaHeadsPerBlock * kMlaHeadDim / 8; v += kMlaThreads) {
    const uint4 x = q[v];
    uint32_t* dst = q_s + v * 4;
    dst[0] = x.x; dst[1] = x.y; dst[2] = x.z; dst[3] = x.w;
  }
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // heads 2*warp, 2*warp+1
  float acc[kMlaHeadsPerBlock][2] = {};
  const auto* cache = reinterpret_cast<const uint4*>(p.kv_cache);
  const int32_t* table = p.block_table + static_cast<int64_t>(b) * p.max_blocks;

  for (int tile = start; tile < end; tile += kMlaTile) {
    __syncthreads();  // the previous tile is consumed (and q_s is written on the first pass)
    for (int v = tid; v < kMlaTile * kMlaHeadDim / 8; v += kMlaThreads) {
      const int t = v / (kMlaHeadDim / 8), c = v % (kMlaHeadDim / 8);
      const int token = tile + t;
      uint4 x = make_uint4(0, 0, 0, 0);  // zeros past the end: p = 0 must not meet NaN garbage
      if (token < end) {
        const int64_t row = static_cast<int64_t>(table[token / p.block_size]) * p.block_size +
                            token % p.block_size;
        x = cache[row * (kMlaHeadDim / 8) + c];
      }
      uint32_t* dst = k_s + t * kMlaKStride + c * 4;
      dst[0] = x.x; dst[1] = x.y; dst[2] = x.z; dst[3] = x.w;
    }
    __syncthreads();

    // Scores of heads 2w, 2w+1 against token `lane`, then their online softmax.
    {
      const uint32_t* kr = k_s + lane * kMlaKStride;
      const uint32_t* qa = q_s + (2 * warp) * kMlaWordsPerRow;
      const uint32_t* qb = qa + kMlaWordsPerRow;
      float sa = 0.0f, sb = 0.0f;
#pragma unroll 8
      for (int i = 0; i < kMlaWordsPerRow; ++i) {
        const float2 k2 = bf16x2_to_float2(kr[i]);
        const float2 a2 = bf16x2_to_float2(qa[i]);
        const float2 b2 = bf16x2_to_float2(qb[i]);
        sa = fmaf(a2.x, k2.x, fmaf(a2.y, k2.y, sa));
        sb = fmaf(b2.x, k2.x, fmaf(b2.y, k2.y, sb));
      }
      const bool valid = tile + lane < end;
      const float s[2] = {valid ? sa * scale_log2 : -INFINITY, valid ? sb * scale_log2 : -INFINITY};
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float m_new = fmaxf(m[j], warp_max(s[j]));  // finite: the tile has a valid token
        const float alpha = exp2f(m[j] - m_new);
        const float pj = valid ? exp2f(s[j] - m_new) : 0.0f;
        l[j] = l[j] * alpha + warp_sum(pj);
        m[j] = m_new;
        p_s[lane * kMlaHeadsPerBlock + 2 * warp + j] = pj;
        if (lane == 0) alpha_s[2 * warp + j] = alpha;
      }
    }
    __syncthreads();

    // o[h][2*tid .. 2*tid+1] = alpha * o + sum_t p[t][h] * c_kv(t).
#pragma unroll
    for (int h = 0; h < kMlaHeadsPerBlock; ++h) {
      acc[h][0] *= alpha_s[h];
      acc[h][1] *= alpha_s[h];
    }
    const int ntok = min(kMlaTile, end - tile);
    for (int t = 0; t < ntok; ++t) {
      const float2 v = bf16x2_to_float2(k_s[t * kMlaKStride + tid]);
      const float4* pr = reinterpret_cast<const float4*>(p_s + t * kMlaHeadsPerBlock);
#pragma unroll
      for (int g = 0; g < kMlaHeadsPerBlock / 4; ++g) {
        const float4 pw = pr[g];
        acc[4 * g + 0][0] = fmaf(pw.x, v.x, acc[4 * g + 0][0]);
        acc[4 * g + 0][1] = fmaf(pw.x, v.y, acc[4 * g + 0][1]);
        acc[4 * g + 1][0] = fmaf(pw.y, v.x, acc[4 * g + 1][0]);
        acc[4 * g + 1][1] = fmaf(pw.y, v.y, acc[4 * g + 1][1]);
        acc[4 * g + 2][0] = fmaf(pw.z, v.x, acc[4 * g + 2][0]);
        acc[4 * g + 2][1] = fmaf(pw.z, v.y, acc[4 * g + 2][1]);
        acc[4 * g + 3][0] = fmaf(pw.w, v.x, acc[4 * g + 3][0]);
        acc[4 * g + 3][1] = fmaf(pw.w, v.y, acc[4 * g + 3][1]);
      }
    }
  }

  // Partials: o [h][item][512], then (max, sum) [h][item][2] after all o (mla_part).
  const int64_t parts = static_cast<int64_t>(p.batch) * p.heads * splits;
  float* o_ws = p.workspace;
  float* ml_ws = p.workspace + parts * kMlaLatentDim;
#pragma unroll
  for (int h = 0; h < kMlaHeadsPerBlock; ++h) {
    const int64_t part = mla_part(p, h0 + h, work.item, splits);
    *reinterpret_cast<float2*>(o_ws + part * kMlaLatentDim + 2 * tid) = make_float2(acc[h][0], acc[h][1]);
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t part = mla_part(p, h0 + 2 * warp + j, work.item, splits);
      ml_ws[part * 2] = m[j];
      ml_ws[part * 2 + 1] = l[j];
    }
  }
}

// Merges the splits of one (sequence, head): kGroups groups of 128 threads over the splits (group
// g takes splits g, g + kGroups, ...), each thread four latent dimensions. The block's first pass
// takes the largest max over the splits (threads over splits, then a block reduction); the
// second weighs each split's o by 2^(m - max), eight splits' loads in flight per group, the first
// eight issued with the first pass's (a split's partial is 2 KB, read from L2: the merge is bound
// by the bytes in flight and its round trips); the groups'
// sums meet in shared memory. Four groups where the blocks are few (one sequence: `heads`
// blocks), one where they fill the GPU anyway (mla_combine_groups; registers capped at 64 for
// eight blocks an SM: a batch of short sequences has thousands of blocks of one round trip each,
// and a merge with 16 partials in flight, 118 registers, lost 10% on one). Splits with no
// tokens (sum 0) are skipped, whatever their o holds. Launched after the split kernel, with
// programmatic dependent launch where the launcher asks for it: pdl_wait() first.
static_assert(128 * 4 == kMlaLatentDim, "each thread of a group owns four latent dimensions");

template <int kGroups>
__global__ void __launch_bounds__(128 * kGroups, kGroups == 1 ? 8 : 2) mla_combine_kernel(MlaDecodeParams p, int splits) {
  constexpr int kThreads = 128 * kGroups;
  __shared__ float warp_max[kThreads / kWarpSize];
  __shared__ float4 part_o[kGroups > 1 ? kGroups - 1 : 1][128];
  __shared__ float part_sum[kGroups > 1 ? kGroups - 1 : 1];
  const int tid = threadIdx.x, group = tid / 128, t = tid % 128;
  const int64_t bh = blockIdx.x;
  const int b = static_cast<int>(bh / p.heads), h = static_cast<int>(bh % p.heads);
  const int items = p.batch * splits;
  // This sequence's items: its splits, or its entries of the work list (written before the split
  // kernel started: read while that kernel still runs).
  int item0 = b * splits, count = splits;
  if (p.work_list != nullptr) {
    const int32_t* first = p.work_list + kMlaWorkHeaderInts + kMlaWorkItemInts * items;
    item0 = first[b];
    count = first[b + 1] - item0;
  }
  pdl_wait();  // the split kernel's partials (a no-op in a plain launch)
  const int64_t parts = static_cast<int64_t>(items) * p.heads;
  const int64_t part0 = mla_part(p, h, item0, splits);
  const float4* o_ws = reinterpret_cast<const float4*>(p.workspace + part0 * kMlaLatentDim) + t;
  const float2* ml_ws = reinterpret_cast<const float2*>(p.workspace + parts * kMlaLatentDim) + part0;
  // kInFlight partials' loads a thread before their sums (absent ones predicated off, so a
  // sequence's last partials cost one round too). The first batch's loads go out with the max
  // pass's, before its reduction: one L2 round trip for both, which is the whole merge of a
  // sequence with up to kInFlight items a group (most of them in a batch of short sequences).
  constexpr int kInFlight = 8, kStep = kGroups * kInFlight;
  float2 ml[kInFlight];
  float4 v[kInFlight];
  auto load_batch = [&](int s) {
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const int sk = s + k * kGroups;
      ml[k] = sk < count ? ml_ws[sk] : make_float2(-INFINITY, 0.0f);
      v[k] = sk < count ? o_ws[static_cast<int64_t>(sk) * (kMlaLatentDim / 4)]
                        : make_float4(0, 0, 0, 0);
    }
  };
  load_batch(group);
  float m_max = -INFINITY;
  for (int s = tid; s < count; s += kThreads) {
    const float2 ms = ml_ws[s];
    if (ms.y > 0.0f) m_max = fmaxf(m_max, ms.x);
  }
#pragma unroll
  for (int d = kWarpSize / 2; d > 0; d /= 2)
    m_max = fmaxf(m_max, __shfl_xor_sync(0xffffffffu, m_max, d));
  if (tid % kWarpSize == 0) warp_max[tid / kWarpSize] = m_max;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kThreads / kWarpSize; ++w) m_max = fmaxf(m_max, warp_max[w]);
  float4 o = make_float4(0, 0, 0, 0);
  float sum = 0.0f;
  auto add = [&](const float2 mk, const float4 vk) {  // (w is the same in the whole group)
    if (!(mk.y > 0.0f)) return;  // an empty split
    const float w = exp2f(mk.x - m_max);
    sum += w * mk.y;
    o.x = fmaf(w, vk.x, o.x);
    o.y = fmaf(w, vk.y, o.y);
    o.z = fmaf(w, vk.z, o.z);
    o.w = fmaf(w, vk.w, o.w);
  };
  // Added in split order whatever the batching.
  for (int s = group; s < count; s += kStep) {
    if (s != group) load_batch(s);
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) add(ml[k], v[k]);
  }
  if constexpr (kGroups > 1) {
    if (group > 0) {
      part_o[group - 1][t] = o;
      if (t == 0) part_sum[group - 1] = sum;
    }
    __syncthreads();
    if (group > 0) return;
#pragma unroll
    for (int g = 0; g < kGroups - 1; ++g) {
      const float4 v = part_o[g][t];
      o.x += v.x;
      o.y += v.y;
      o.z += v.z;
      o.w += v.w;
      sum += part_sum[g];
    }
  }
  const float inv = 1.0f / sum;
  const uint32_t lo = float_to_bf16_bits(o.x * inv) | uint32_t{float_to_bf16_bits(o.y * inv)} << 16;
  const uint32_t hi = float_to_bf16_bits(o.z * inv) | uint32_t{float_to_bf16_bits(o.w * inv)} << 16;
  uint16_t* out = reinterpret_cast<uint16_t*>(p.out) + bh * kMlaLatentDim;
  reinterpret_cast<uint2*>(out)[t] = make_uint2(lo, hi);
}

// Groups of the combine for `blocks` (sequence, head) blocks: 4 up to 256 blocks, else 1 (H200,
// docs/experiments.md, MLA decode: 512 threads took the 64K batch-1 merge from 13.5 to 8.4 us
// and slowed batch 8's from 7.3 to 12.3 us).
constexpr int mla_combine_groups(int64_t blocks) { return blocks <= 256 ? 4 : 1; }

}  // namespace hymoe::gpu::kernels
