#include "hymoe/kernels/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "hymoe/common/error.h"

namespace hymoe::kernels {

void validate(const RouterParams& p) {
  HYMOE_CHECK(p.n_experts > 0 && p.n_experts <= kMaxRouterExperts, kInvalidArgument,
              "router: n_experts {} outside 1..{}", p.n_experts, kMaxRouterExperts);
  HYMOE_CHECK(p.n_group > 0 && p.n_experts % p.n_group == 0, kInvalidArgument,
              "router: n_group {} does not divide n_experts {}", p.n_group, p.n_experts);
  HYMOE_CHECK(p.topk_group > 0 && p.topk_group <= p.n_group, kInvalidArgument,
              "router: topk_group {} outside 1..n_group {}", p.topk_group, p.n_group);
  HYMOE_CHECK(p.top_k > 0 && p.top_k <= p.topk_group * (p.n_experts / p.n_group),
              kInvalidArgument, "router: top_k {} exceeds the experts of {} groups", p.top_k,
              p.topk_group);
  HYMOE_CHECK(p.bias != nullptr, kInvalidArgument, "router: null e_score_correction_bias");
}

void route_noaux_tc(const RouterParams& p, const float* logits, int32_t* ids, float* weights) {
  float s[kMaxRouterExperts], choice[kMaxRouterExperts];
  for (int e = 0; e < p.n_experts; ++e) {
    s[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    choice[e] = s[e] + p.bias[e];
  }
  const int per_group = p.n_experts / p.n_group;
  float group_score[kMaxRouterExperts];
  for (int g = 0; g < p.n_group; ++g) {
    // Sum of the two largest (one when a group has a single expert).
    float a = -std::numeric_limits<float>::infinity(), b = a;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
      if (choice[e] > a) {
        b = a;
        a = choice[e];
      } else if (choice[e] > b) {
        b = choice[e];
      }
    }
    group_score[g] = per_group >= 2 ? a + b : a;
  }
  bool keep[kMaxRouterExperts] = {};
  for (int t = 0; t < p.topk_group; ++t) {
    int best = -1;
    for (int g = 0; g < p.n_group; ++g)
      if (!keep[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
    keep[best] = true;
  }
  float masked[kMaxRouterExperts];
  for (int e = 0; e < p.n_experts; ++e) masked[e] = keep[e / per_group] ? choice[e] : 0.0f;
  bool taken[kMaxRouterExperts] = {};
  float sum = 0.0f;
  for (int t = 0; t < p.top_k; ++t) {
    int best = -1;
    for (int e = 0; e < p.n_experts; ++e)
      if (!taken[e] && (best < 0 || masked[e] > masked[best])) best = e;
    taken[best] = true;
    ids[t] = best;
    weights[t] = s[best];
    sum += s[best];
  }
  const float f = p.routed_scaling_factor / (p.norm_topk_prob ? sum + 1e-20f : 1.0f);
  for (int t = 0; t < p.top_k; ++t) weights[t] *= f;
}

void route_noaux_tc_reference(const RouterParams& p, const float* logits, int32_t* ids,
                              float* weights) {
  const int n = p.n_experts, per_group = n / p.n_group;
  std::vector<double> s(n), choice(n);
  for (int e = 0; e < n; ++e) {
    s[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
    choice[e] = s[e] + p.bias[e];
  }
  std::vector<std::pair<double, int>> groups;
  for (int g = 0; g < p.n_group; ++g) {
    std::vector<double> c(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
    std::sort(c.rbegin(), c.rend());
    groups.push_back({c[0] + (c.size() > 1 ? c[1] : 0.0), g});
  }
  // Descending score, ascending index on ties.
  auto by_score = [](const std::pair<double, int>& a, const std::pair<double, int>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::stable_sort(groups.begin(), groups.end(), by_score);
  std::vector<bool> keep(p.n_group, false);
  for (int t = 0; t < p.topk_group; ++t) keep[groups[t].second] = true;
  std::vector<std::pair<double, int>> experts;
  for (int e = 0; e < n; ++e) experts.push_back({keep[e / per_group] ? choice[e] : 0.0, e});
  std::stable_sort(experts.begin(), experts.end(), by_score);
  double sum = 0.0;
  for (int t = 0; t < p.top_k; ++t) sum += s[experts[t].second];
  for (int t = 0; t < p.top_k; ++t) {
    ids[t] = experts[t].second;
    const double w = s[experts[t].second] / (p.norm_topk_prob ? sum + 1e-20 : 1.0);
    weights[t] = static_cast<float>(w * p.routed_scaling_factor);
  }
}

}  // namespace hymoe::kernels
