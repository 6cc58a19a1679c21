// Device code of the GPU layer path's small kernels (hymoe/gpu/layer_kernels.h): plain,
// deterministic loops; the tuned kernels (fp8_gemv, mla_decode) carry the heavy work where the
// shapes allow.
#pragma once

#include <cfloat>

#include "common.cuh"
#include "hymoe/gpu/layer_kernels.h"

namespace hymoe::gpu::kernels {

__global__ void embed_f32_kernel(EmbedF32Params p) {
  const int t = blockIdx.x;
  const auto* row = reinterpret_cast<const uint16_t*>(p.table) + int64_t{p.ids[t]} * p.dim;
  float* out = p.out + int64_t{t} * p.dim;
  for (int c = threadIdx.x; c < p.dim; c += blockDim.x) out[c] = bf16_bits_to_float(row[c]);
}

__global__ void rmsnorm_f32_kernel(RmsNormF32Params p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* x = p.x + r * (p.x_stride ? p.x_stride : p.cols);
  float sumsq = 0.0f;
  for (int c = threadIdx.x; c < p.cols; c += blockDim.x) sumsq += x[c] * x[c];
  const float inv = 1.0f / sqrtf(block_sum(sumsq, scratch) / static_cast<float>(p.cols) + p.eps);
  auto* out = reinterpret_cast<uint16_t*>(p.out) + r * (p.out_stride ? p.out_stride : p.cols);
  for (int c = threadIdx.x; c < p.cols; c += blockDim.x) {
    const float v = x[c] * inv * p.weight[c];
    out[c] = float_to_bf16_bits(v);
    if (p.out_f32) p.out_f32[r * p.cols + c] = v;
  }
}

__global__ void residual_add_kernel(ResidualAddParams p) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.n; i += int64_t{gridDim.x} * blockDim.x) {
    float v = p.h[i];
    if (p.a) v += p.a[i];
    if (p.b) v += p.b[i];
    p.h[i] = v;
  }
}

// 64 tokens x 64 rows a block, 256 threads of 4 x 4 outputs, K in steps of 32 through shared
// memory. Each output is one FP32 sum over c in order.
inline constexpr int kDenseGemmTile = 64, kDenseGemmK = 32;
__global__ void __launch_bounds__(256) dense_gemm_f32_kernel(DenseGemmF32Params p) {
  __shared__ float xs[kDenseGemmK][kDenseGemmTile + 4];
  __shared__ float ws[kDenseGemmK][kDenseGemmTile + 4];
  const int t0 = blockIdx.y * kDenseGemmTile, r0 = blockIdx.x * kDenseGemmTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // rows r0 + tx*4.., tokens t0 + ty*4..
  const auto* w = reinterpret_cast<const uint16_t*>(p.w);
  float acc[4][4] = {};
  for (int k0 = 0; k0 < p.k; k0 += kDenseGemmK) {
    // 64 x 32 of each operand: 2048 values, 8 per thread, transposed into [k][token/row].
    for (int i = threadIdx.x; i < kDenseGemmTile * kDenseGemmK; i += blockDim.x) {
      const int row = i / kDenseGemmK, kk = i % kDenseGemmK, c = k0 + kk;
      const int t = t0 + row, r = r0 + row;
      xs[kk][row] = (t < p.tokens && c < p.k) ? p.x[int64_t{t} * p.k + c] : 0.0f;
      ws[kk][row] = (r < p.n && c < p.k) ? bf16_bits_to_float(w[int64_t{r} * p.k + c]) : 0.0f;
    }
    __syncthreads();
    const int kn = min(kDenseGemmK, p.k - k0);
    for (int kk = 0; kk < kn; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[kk][ty * 4 + i];
        b[i] = ws[kk][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = t0 + ty * 4 + i;
    if (t >= p.tokens) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = r0 + tx * 4 + j;
      if (r < p.n) p.y[int64_t{t} * p.ldy + r] = acc[i][j];
    }
  }
}

// Grid rows; the block strides over the columns.
__global__ void widen_bf16_kernel(WidenBf16Params p) {
  const int64_t r = blockIdx.x;
  const auto* x = reinterpret_cast<const uint16_t*>(p.x) + r * (p.x_stride ? p.x_stride : p.cols);
  float* out = p.out + r * (p.out_stride ? p.out_stride : p.cols);
  for (int c = threadIdx.x; c < p.cols; c += blockDim.x) out[c] = bf16_bits_to_float(x[c]);
}

// Grid: one block per token; 16-byte copies.
__global__ void mla_gather_latent_kernel(MlaGatherLatentParams p) {
  const int t = blockIdx.x;
  const int64_t row = int64_t{p.block_table[t / p.block_tokens]} * p.block_tokens + t % p.block_tokens;
  const auto* src = reinterpret_cast<const uint4*>(p.cache + row * p.width);
  auto* dst = reinterpret_cast<uint4*>(p.out + int64_t{t} * p.width);
  for (int i = threadIdx.x; i < p.width / 8; i += blockDim.x) dst[i] = src[i];
}

// Grid: one block per token; 16-byte copies, (nope + rope + vdim) / 8 of them per head.
__global__ void mla_assemble_kv_kernel(MlaAssembleKvParams p) {
  const int64_t t = blockIdx.x;
  const int n8 = p.nope / 8, r8 = p.rope / 8, v8 = p.vdim / 8, per_head = n8 + r8 + v8;
  const auto* kvb = reinterpret_cast<const uint4*>(p.kvb + t * p.heads * (p.nope + p.vdim));
  const auto* pe = reinterpret_cast<const uint4*>(p.latent + t * p.latent_stride + p.lora);
  auto* out = reinterpret_cast<uint4*>(p.out + t * p.heads * (p.nope + p.rope + p.vdim));
  for (int i = threadIdx.x; i < p.heads * per_head; i += blockDim.x) {
    const int h = i / per_head, j = i % per_head;
    const uint4* head = kvb + int64_t{h} * (n8 + v8);
    out[i] = j < n8 ? head[j] : j < n8 + r8 ? pe[j - n8] : head[j - r8];
  }
}

__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

// Grid rows; the block strides over the columns.
__global__ void silu_mul_f32_kernel(SiluMulF32Params p) {
  const int64_t r = blockIdx.x;
  const float* g = p.gate_up + r * p.in_stride;
  auto* out = reinterpret_cast<uint16_t*>(p.out) + r * p.out_stride;
  for (int c = threadIdx.x; c < p.cols; c += blockDim.x) out[c] = float_to_bf16_bits(silu(g[c]) * g[p.cols + c]);
}

// YaRN rope of one pair: in x[2i], x[2i + 1] -> out[i], out[i + half] (the rope_yarn layout), FP32.
__device__ __forceinline__ void rope_pair(const YarnTable& table, int pos, int i, float a, float b, float& lo, float& hi) {
  float s, c;
  sincosf(static_cast<float>(pos) * table.inv_freq[i], &s, &c);
  c *= table.mscale;
  s *= table.mscale;
  lo = a * c - b * s;
  hi = b * c + a * s;
}

// One warp per output row; each lane takes 8 columns at a time (k % 8 == 0, 16-byte rows).
__global__ void dense_gemv_f32_kernel(DenseGemvParams p) {
  const int warps = blockDim.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int r = blockIdx.x * warps + threadIdx.x / kWarpSize;
  if (r >= p.n) return;
  const auto* w = reinterpret_cast<const uint16_t*>(p.w) + int64_t{r} * p.k;
  float acc[kDenseGemvMaxTokens] = {};
  for (int c = lane * 8; c < p.k; c += kWarpSize * 8) {
    const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(w + c);
    float wf[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) wf[i] = bf16_bits_to_float(v.v[i]);
#pragma unroll
    for (int t = 0; t < kDenseGemvMaxTokens; ++t) {
      if (t >= p.tokens) break;
      const float4* x = reinterpret_cast<const float4*>(p.x + int64_t{t} * p.k + c);
      const float4 x0 = x[0], x1 = x[1];
      acc[t] += wf[0] * x0.x + wf[1] * x0.y + wf[2] * x0.z + wf[3] * x0.w + wf[4] * x1.x + wf[5] * x1.y +
                wf[6] * x1.z + wf[7] * x1.w;
    }
  }
#pragma unroll
  for (int t = 0; t < kDenseGemvMaxTokens; ++t) {
    if (t >= p.tokens) break;
    const float s = warp_sum(acc[t]);
    if (lane == 0) p.y[int64_t{t} * p.ldy + r] = s;
  }
}

// Grid tokens: the row's sum of squares over the block, then each thread writes its columns of
// c_kv and its rope pairs.
__global__ void mla_latent_rows_kernel(MlaLatentRowsParams p) {
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  const float* x = p.kva + int64_t{t} * p.kva_stride;
  auto* row = reinterpret_cast<uint16_t*>(p.cache) + int64_t{p.slots[t]} * (p.lora + p.rope);
  float sumsq = 0.0f;
  for (int c = threadIdx.x; c < p.lora; c += blockDim.x) sumsq += x[c] * x[c];
  const float inv = 1.0f / sqrtf(block_sum(sumsq, scratch) / static_cast<float>(p.lora) + p.eps);
  for (int c = threadIdx.x; c < p.lora; c += blockDim.x) row[c] = float_to_bf16_bits(x[c] * inv * p.norm_weight[c]);
  const int half = p.rope / 2;
  const float* pe = x + p.lora;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float lo, hi;
    rope_pair(p.table, p.positions[t], i, pe[2 * i], pe[2 * i + 1], lo, hi);
    row[p.lora + i] = float_to_bf16_bits(lo);
    row[p.lora + half + i] = float_to_bf16_bits(hi);
  }
}

// Grid (heads, tokens); q_nope of the (token, head) in shared memory (nope floats).
__global__ void mla_absorb_q_kernel(MlaAbsorbParams p) {
  extern __shared__ float qs[];
  const int h = blockIdx.x, t = blockIdx.y;
  const int qk = p.nope + p.rope, width = p.lora + p.rope;
  const float* q = p.q + (int64_t{t} * p.heads + h) * qk;
  float* out = p.out + (int64_t{t} * p.heads + h) * width;
  for (int r = threadIdx.x; r < p.nope; r += blockDim.x) qs[r] = q[r];
  const int half = p.rope / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    rope_pair(p.table, p.positions[t], i, q[p.nope + 2 * i], q[p.nope + 2 * i + 1], out[p.lora + i],
              out[p.lora + half + i]);
  }
  __syncthreads();
  const auto* w = reinterpret_cast<const uint16_t*>(p.w_uk) + int64_t{h} * p.nope * p.lora;
  for (int c = threadIdx.x; c < p.lora; c += blockDim.x) {
    float acc = 0.0f;
    for (int r = 0; r < p.nope; ++r) acc += qs[r] * bf16_bits_to_float(w[int64_t{r} * p.lora + c]);
    out[c] = acc;
  }
  if (p.out_bf16) {
    __syncthreads();  // the rope part was written by other threads
    auto* ob = reinterpret_cast<uint16_t*>(p.out_bf16) + (int64_t{t} * p.heads + h) * width;
    for (int c = threadIdx.x; c < width; c += blockDim.x) ob[c] = float_to_bf16_bits(out[c]);
  }
}

// Grid (heads, tokens); o_lat of the (token, head) in shared memory (lora floats).
__global__ void mla_unabsorb_kernel(MlaUnabsorbParams p) {
  extern __shared__ float os[];
  const int h = blockIdx.x, t = blockIdx.y;
  const int64_t base = (int64_t{t} * p.heads + h) * p.lora;
  if (p.o_lat) {
    for (int c = threadIdx.x; c < p.lora; c += blockDim.x) os[c] = p.o_lat[base + c];
  } else {
    const auto* o = reinterpret_cast<const uint16_t*>(p.o_lat_bf16) + base;
    for (int c = threadIdx.x; c < p.lora; c += blockDim.x) os[c] = bf16_bits_to_float(o[c]);
  }
  __syncthreads();
  const auto* w = reinterpret_cast<const uint16_t*>(p.w_uv_t) + int64_t{h} * p.lora * p.v_dim;
  auto* out = reinterpret_cast<uint16_t*>(p.out) + (int64_t{t} * p.heads + h) * p.v_dim;
  for (int v = threadIdx.x; v < p.v_dim; v += blockDim.x) {
    float acc = 0.0f;
    for (int c = 0; c < p.lora; ++c) acc += os[c] * bf16_bits_to_float(w[int64_t{c} * p.v_dim + v]);
    out[v] = float_to_bf16_bits(acc);
  }
}

inline constexpr int kMlaAnyThreads = 128;  // threads per block = keys per tile
inline constexpr int kMlaAnyMaxCols = 8;    // lora <= kMlaAnyThreads * kMlaAnyMaxCols

// Grid (heads, tokens). Shared: the query (width floats) and one tile's probabilities.
__global__ void __launch_bounds__(kMlaAnyThreads) mla_attention_any_kernel(MlaAttentionParams p) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  __shared__ float probs[kMlaAnyThreads];
  float* qs = smem;
  const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
  const int width = p.lora + p.rope;
  const float* q = p.q + (int64_t{t} * p.heads + h) * width;
  for (int c = tid; c < width; c += kMlaAnyThreads) qs[c] = q[c];
  __syncthreads();
  const auto* cache = reinterpret_cast<const uint16_t*>(p.cache);
  const int32_t* table = p.block_table + int64_t{t} * p.max_blocks;
  auto row_of = [&](int pos) {
    return cache + (int64_t{table[pos / p.block_tokens]} * p.block_tokens + pos % p.block_tokens) * width;
  };
  const int len = p.seq_lens[t];
  float m = -FLT_MAX, l = 0.0f;
  float acc[kMlaAnyMaxCols] = {};
  for (int s = 0; s < len; s += kMlaAnyThreads) {
    const int pos = s + tid;
    float score = -FLT_MAX;
    if (pos < len) {
      const uint16_t* row = row_of(pos);
      float dot = 0.0f;
      for (int c = 0; c < width; ++c) dot += qs[c] * bf16_bits_to_float(row[c]);
      score = dot * p.scale;
    }
    const float tile_max = block_max(score, scratch);
    const float new_m = fmaxf(m, tile_max);
    const float corr = __expf(m - new_m);
    const float pr = pos < len ? __expf(score - new_m) : 0.0f;
    probs[tid] = pr;
    const float tile_sum = block_sum(pr, scratch);  // synchronises: probs visible after
    l = l * corr + tile_sum;
    const int n = min(kMlaAnyThreads, len - s);
#pragma unroll
    for (int j = 0; j < kMlaAnyMaxCols; ++j) acc[j] *= corr;
    for (int i = 0; i < n; ++i) {
      const uint16_t* row = row_of(s + i);
      const float pi = probs[i];
#pragma unroll
      for (int j = 0; j < kMlaAnyMaxCols; ++j) {
        const int c = tid + j * kMlaAnyThreads;
        if (c < p.lora) acc[j] += pi * bf16_bits_to_float(row[c]);
      }
    }
    m = new_m;
    __syncthreads();  // probs reused by the next tile
  }
  float* out = p.out + (int64_t{t} * p.heads + h) * p.lora;
  const float inv = 1.0f / l;
#pragma unroll
  for (int j = 0; j < kMlaAnyMaxCols; ++j) {
    const int c = tid + j * kMlaAnyThreads;
    if (c < p.lora) out[c] = acc[j] * inv;
  }
}

// Dot product of an FP8 row (128-column scale blocks: scale_row[c / 128]) with BF16 x over one
// warp: lane j takes columns [16 (j + 32 i), +16); each 16-column part is scaled by its block's
// scale and the lanes' sums are reduced in a fixed order.
__device__ __forceinline__ float fp8_row_dot(const uint8_t* w, const float* scale_row, const uint16_t* x, int cols) {
  const int lane = threadIdx.x % kWarpSize;
  float acc = 0.0f;
  for (int c = lane * 16; c < cols; c += kWarpSize * 16) {
    const uint4 wv = *reinterpret_cast<const uint4*>(w + c);
    const uint8_t* wb = reinterpret_cast<const uint8_t*>(&wv);
    const Bf16x8 x0 = *reinterpret_cast<const Bf16x8*>(x + c);
    const Bf16x8 x1 = *reinterpret_cast<const Bf16x8*>(x + c + 8);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const __nv_fp8_e4m3 a = *reinterpret_cast<const __nv_fp8_e4m3*>(wb + i);
      const __nv_fp8_e4m3 b = *reinterpret_cast<const __nv_fp8_e4m3*>(wb + 8 + i);
      s += static_cast<float>(a) * bf16_bits_to_float(x0.v[i]) + static_cast<float>(b) * bf16_bits_to_float(x1.v[i]);
    }
    acc += s * scale_row[c / 128];
  }
  return warp_sum(acc);
}

// Grid (ceil(inter / warps), tokens * top_k): warp w of block b computes row b * warps + w of the
// slot's gate and up, and writes silu(gate) * up in BF16.
__global__ void moe_gemv_gate_up_kernel(MoeGemvParams p) {
  const int warps = blockDim.x / kWarpSize;
  const int r = blockIdx.x * warps + threadIdx.x / kWarpSize;
  const int slot = blockIdx.y;
  if (r >= p.inter) return;
  const int e = p.topk_ids[slot];
  const int t = slot / p.top_k;
  const int64_t sld = p.gate_scale_ld;
  const ExpertWeight g = p.gate[e], u = p.up[e];
  const auto* x = reinterpret_cast<const uint16_t*>(p.x) + int64_t{t} * p.hidden;
  const float gv = fp8_row_dot(reinterpret_cast<const uint8_t*>(g.w) + int64_t{r} * p.hidden, g.scales + (r / 128) * sld, x, p.hidden);
  const float uv = fp8_row_dot(reinterpret_cast<const uint8_t*>(u.w) + int64_t{r} * p.hidden, u.scales + (r / 128) * sld, x, p.hidden);
  if (threadIdx.x % kWarpSize == 0)
    reinterpret_cast<uint16_t*>(p.act)[int64_t{slot} * p.inter + r] = float_to_bf16_bits(silu(gv) * uv);
}

// Grid (ceil(hidden / warps), tokens): warp w of block b computes output row b * warps + w of the
// token, the weighted sum over its top_k slots in slot order.
__global__ void moe_gemv_down_kernel(MoeGemvParams p) {
  const int warps = blockDim.x / kWarpSize;
  const int r = blockIdx.x * warps + threadIdx.x / kWarpSize;
  const int t = blockIdx.y;
  if (r >= p.hidden) return;
  const int64_t sld = p.down_scale_ld;
  float acc = 0.0f;
  for (int k = 0; k < p.top_k; ++k) {
    const int slot = t * p.top_k + k;
    const ExpertWeight d = p.down[p.topk_ids[slot]];
    const auto* a = reinterpret_cast<const uint16_t*>(p.act) + int64_t{slot} * p.inter;
    acc += p.topk_weights[slot] *
           fp8_row_dot(reinterpret_cast<const uint8_t*>(d.w) + int64_t{r} * p.inter, d.scales + (r / 128) * sld, a, p.inter);
  }
  if (threadIdx.x % kWarpSize == 0) p.out[int64_t{t} * p.hidden + r] = acc;
}

}  // namespace hymoe::gpu::kernels
