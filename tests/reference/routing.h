// noaux_tc group-limited routing of DeepSeek-V3 (and Kimi-K2 with one group):
//   s       = sigmoid(router logits)                       [n_experts]
//   choice  = s + e_score_correction_bias                  (used only to choose)
//   group g score = sum of the 2 largest `choice` in g    (groups are contiguous index ranges)
//   keep the topk_group groups with the largest scores; pick the top_k experts by `choice`
//   among the experts of those groups only;
//   weight  = s of the chosen (not choice), divided by their sum when norm_topk_prob,
//             then times routed_scaling_factor.
// Ties (equal group scores or equal choices) go to the lower index, so the result is fully
// determined. Experts of dropped groups can never be chosen (DeepSeek's -inf mask; HF fills them
// with 0.0, which differs only when every kept choice is negative, i.e. bias < -s).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hymoe/model/config.h"

namespace hymoe::reference {

struct RoutingParams {
  int64_t n_experts = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  int64_t top_k = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;

  static RoutingParams from_config(const ModelConfig& config);
};

struct ExpertChoice {
  int64_t expert = 0;
  double weight = 0.0;  // multiplies the expert's output
};

// Routes one token from its sigmoid scores. Returns top_k choices ordered by decreasing
// `choice` (ties: lower expert index first). Throws hymoe::Error (kInvalidArgument) when sizes
// disagree with params, n_group does not divide n_experts, a group has fewer than 2 experts
// while n_group > 1, or top_k exceeds the experts of the kept groups.
std::vector<ExpertChoice> route_noaux_tc(std::span<const double> scores,
                                         std::span<const double> bias, const RoutingParams& p);

}  // namespace hymoe::reference
