// The noaux_tc MoE router of DeepSeek-V3 / Kimi-K2 over precomputed FP32 gate logits:
// s = sigmoid(logit); choice = s + e_score_correction_bias; group score = sum of the top-2 choices
// of each group; keep the topk_group best groups; top_k experts by choice inside them;
// weights = s of those, divided by their sum when normalize, times scaling.
// Ties go to the lower index (groups and experts). Output per token: sorted by choice, best first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hymoe::gpu {

inline constexpr int kRouterMaxExperts = 512;
inline constexpr int kRouterMaxGroups = 32;
inline constexpr int kRouterMaxTopK = 16;

struct RouterParams {
  const float* logits = nullptr;  // [tokens, experts], row t at logits + t * experts
  const float* bias = nullptr;    // [experts]
  int32_t* topk_ids = nullptr;    // [tokens, top_k]
  float* topk_weights = nullptr;  // [tokens, top_k]
  int tokens = 0;
  int experts = 256;              // <= kRouterMaxExperts, a multiple of groups
  int groups = 8;                 // n_group, <= kRouterMaxGroups, >= 2 experts per group
  int topk_group = 4;             // groups kept, <= groups
  int top_k = 8;                  // <= kRouterMaxTopK, <= experts in the kept groups
  bool normalize = true;          // norm_topk_prob
  float scaling = 2.5f;           // routed_scaling_factor
};

void route_noaux_tc(const RouterParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
