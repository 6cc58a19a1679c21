// The noaux_tc router of DeepSeek-V3 / Kimi-K2, one token at a time, from the router logits:
//   s = sigmoid(logits); choice = s + bias; group score = sum of the 2 largest `choice` per group;
//   keep the topk_group best groups; the top_k experts by `choice` among them (others count as
//   0.0, as HF's masked_fill does); weight = s of those, divided by their sum when norm_topk_prob,
//   times routed_scaling_factor. Ties go to the lower index.
#pragma once

#include <cstdint>

namespace hymoe::kernels {

inline constexpr int kMaxRouterExperts = 512;

struct RouterParams {
  int n_experts = 256;       // <= kMaxRouterExperts
  int n_group = 8;           // divides n_experts
  int topk_group = 4;        // <= n_group
  int top_k = 8;             // <= topk_group * n_experts / n_group
  bool norm_topk_prob = true;
  float routed_scaling_factor = 2.5f;
  const float* bias = nullptr;  // e_score_correction_bias [n_experts]
};

// Throws hymoe::Error (kInvalidArgument) on inconsistent fields.
void validate(const RouterParams& p);
// ids[top_k] in descending order of choice, weights[top_k] to match. No allocation.
void route_noaux_tc(const RouterParams& p, const float* logits, int32_t* ids, float* weights);
// Reference: sorts with std::vector and double sigmoid.
void route_noaux_tc_reference(const RouterParams& p, const float* logits, int32_t* ids,
                              float* weights);

}  // namespace hymoe::kernels
