// noaux_tc router: one warp per token. The token's sigmoid scores and biased choices live in
// shared memory; lane g computes group g's top-2 sum; group and expert selection are repeated
// warp arg-max reductions (ties to the lower index).
#pragma once

#include "common.cuh"
#include "hymoe/gpu/router.h"

namespace hymoe::gpu::kernels {

inline constexpr int kRouterWarpsPerBlock = 4;

// Arg-max over the warp of (value, index): larger value wins, equal values go to the lower index.
__device__ __forceinline__ void warp_argmax(float& value, int& index) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, value, offset);
    const int i = __shfl_xor_sync(0xffffffffu, index, offset);
    if (v > value || (v == value && i < index)) {
      value = v;
      index = i;
    }
  }
}

__global__ void __launch_bounds__(kRouterWarpsPerBlock * kWarpSize)
router_noaux_tc_kernel(RouterParams p) {
  __shared__ float s_score[kRouterWarpsPerBlock][kRouterMaxExperts];
  __shared__ float s_choice[kRouterWarpsPerBlock][kRouterMaxExperts];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int t = blockIdx.x * kRouterWarpsPerBlock + warp;
  if (t >= p.tokens) return;  // whole warps exit together; no block barriers below
  float* score = s_score[warp];
  float* choice = s_choice[warp];
  const float* logits = p.logits + static_cast<int64_t>(t) * p.experts;
  for (int e = lane; e < p.experts; e += kWarpSize) {
    const float s = 1.0f / (1.0f + expf(-logits[e]));
    score[e] = s;
    choice[e] = s + p.bias[e];
  }
  __syncwarp();

  // Group scores: sum of the two largest choices of each group.
  const int group_size = p.experts / p.groups;
  float group_score = -INFINITY;
  if (lane < p.groups) {
    float first = -INFINITY, second = -INFINITY;
    for (int e = lane * group_size; e < (lane + 1) * group_size; ++e) {
      const float c = choice[e];
      if (c > first) {
        second = first;
        first = c;
      } else if (c > second) {
        second = c;
      }
    }
    group_score = first + second;
  }
  // Keep the topk_group best groups: bit g of `kept` set.
  uint32_t kept = 0;
  for (int r = 0; r < p.topk_group; ++r) {
    float v = (lane < p.groups && !((kept >> lane) & 1u)) ? group_score : -INFINITY;
    int idx = lane < p.groups ? lane : kWarpSize;
    if ((kept >> lane) & 1u) idx = kWarpSize;
    warp_argmax(v, idx);
    kept |= 1u << idx;
  }

  // Top-k experts of the kept groups by choice. Selected experts are marked by a NaN choice
  // (never selected again; a real choice is finite since sigmoid and the bias are).
  float weight_sum = 0.0f;
  int my_id = -1;
  float my_weight = 0.0f;
  for (int r = 0; r < p.top_k; ++r) {
    float best = -INFINITY;
    int best_idx = 0x7fffffff;
    for (int e = lane; e < p.experts; e += kWarpSize) {
      if (!((kept >> (e / group_size)) & 1u)) continue;
      const float c = choice[e];
      if (c != c) continue;  // already taken
      if (c > best || (c == best && e < best_idx)) {
        best = c;
        best_idx = e;
      }
    }
    warp_argmax(best, best_idx);
    const float w = score[best_idx];
    weight_sum += w;
    if (lane == r) {
      my_id = best_idx;
      my_weight = w;
    }
    __syncwarp();
    if (lane == 0) choice[best_idx] = __int_as_float(0x7fc00000);
    __syncwarp();
  }
  if (lane < p.top_k) {
    const float scale = p.normalize ? p.scaling / (weight_sum + 1e-20f) : p.scaling;
    p.topk_ids[static_cast<int64_t>(t) * p.top_k + lane] = my_id;
    p.topk_weights[static_cast<int64_t>(t) * p.top_k + lane] = my_weight * scale;
  }
}

}  // namespace hymoe::gpu::kernels
