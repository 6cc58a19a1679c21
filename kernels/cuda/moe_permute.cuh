// MoE dispatch kernels: routing counts + scan (one block), slot assignment, FP8 row permutation
// with grouped scales, weighted un-permute.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/moe.h"

namespace hymoe::gpu::kernels {

inline constexpr int kMoeCountThreads = 1024;

// One block: histogram of the routed experts in shared memory, then an exclusive scan.
__global__ void __launch_bounds__(kMoeCountThreads) moe_count_kernel(MoeOffsetsParams p) {
  __shared__ int32_t counts[kMoeMaxExperts];
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  const int64_t entries = static_cast<int64_t>(p.tokens) * p.top_k;
  for (int64_t i = threadIdx.x; i < entries; i += blockDim.x) atomicAdd(&counts[p.topk_ids[i]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {  // <= 1024 experts: a serial scan is a few microseconds
    int32_t run = 0;
    for (int e = 0; e < p.experts; ++e) {
      const int32_t c = counts[e];
      p.expert_offsets[e] = run;
      p.cursor[e] = run;
      run += c;
    }
    p.expert_offsets[p.experts] = run;
  }
}

__global__ void moe_assign_kernel(MoeOffsetsParams p) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= static_cast<int64_t>(p.tokens) * p.top_k) return;
  p.slot_rows[i] = atomicAdd(&p.cursor[p.topk_ids[i]], 1);
}

// One block per (token, slot): copy the FP8 row (16-byte vectors) and its scales.
__global__ void moe_permute_fp8_kernel(MoePermuteParams p) {
  const int64_t i = blockIdx.x;  // token * top_k + slot
  const int t = static_cast<int>(i / p.top_k);
  const int row = p.slot_rows[i];
  const int e = p.topk_ids[i];
  const int off = p.expert_offsets[e], rows = p.expert_offsets[e + 1] - off;
  const auto* src = reinterpret_cast<const uint4*>(reinterpret_cast<const uint8_t*>(p.x) + int64_t{t} * p.cols);
  auto* dst = reinterpret_cast<uint4*>(reinterpret_cast<uint8_t*>(p.out) + int64_t{row} * p.cols);
  for (int v = threadIdx.x; v < p.cols / 16; v += blockDim.x) dst[v] = src[v];
  const int col_blocks = (p.cols + 127) / 128;
  for (int kb = threadIdx.x; kb < col_blocks; kb += blockDim.x)
    p.out_scales[grouped_scale_offset(col_blocks, off, e) + int64_t{kb} * rows + (row - off)] =
        p.x_scales[kb * p.x_scale_ld + t];
}

// Grid (tokens, column chunks of 2048); 256 threads x 8 columns.
__global__ void moe_unpermute_kernel(MoeUnpermuteParams p) {
  const int t = blockIdx.x;
  const int c = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
  if (c >= p.cols) return;
  float acc[8] = {};
  for (int j = 0; j < p.top_k; ++j) {
    const int64_t slot = int64_t{t} * p.top_k + j;
    const float w = p.topk_weights[slot];
    const auto* y = reinterpret_cast<const uint16_t*>(p.y) + p.slot_rows[slot] * p.ldy;
    const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(y + c);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = fmaf(w, bf16_bits_to_float(v.v[i]), acc[i]);
  }
  Bf16x8 o;
#pragma unroll
  for (int i = 0; i < 8; ++i) o.v[i] = float_to_bf16_bits(acc[i]);
  *reinterpret_cast<Bf16x8*>(reinterpret_cast<uint16_t*>(p.out) + t * p.ldo + c) = o;
}

// Grid (tokens, ceil(cols / 2048)), 256 threads of 8 columns: the token's in-batch slots in slot
// order, then one FP32 add to out.
__global__ void moe_unpermute_add_kernel(MoeUnpermuteAddParams p) {
  const int t = blockIdx.x;
  const int c = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
  if (c >= p.cols) return;
  float acc[8] = {};
  bool any = false;
  for (int j = 0; j < p.top_k; ++j) {
    const int64_t slot = int64_t{t} * p.top_k + j;
    const int e = p.topk_ids[slot];
    if (e < p.expert_begin || e >= p.expert_end) continue;
    any = true;
    const float w = p.topk_weights[slot];
    const auto* y = reinterpret_cast<const uint16_t*>(p.y) + (p.slot_rows[slot] - p.row_begin) * p.ldy;
    const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(y + c);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = fmaf(w, bf16_bits_to_float(v.v[i]), acc[i]);
  }
  if (!any) return;
  float* out = p.out + int64_t{t} * p.ldo + c;
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] += acc[i];
}

}  // namespace hymoe::gpu::kernels
