#include "routing.h"

#include <algorithm>
#include <numeric>

#include "hymoe/common/error.h"

namespace hymoe::reference {
namespace {

// Indices of `values` ordered by decreasing value, ties by increasing index.
std::vector<int64_t> order_desc(std::span<const double> values) {
  std::vector<int64_t> idx(values.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return values[a] > values[b]; });
  return idx;
}

}  // namespace

RoutingParams RoutingParams::from_config(const ModelConfig& config) {
  RoutingParams p;
  p.n_experts = config.n_routed_experts;
  p.n_group = config.n_group;
  p.topk_group = config.topk_group;
  p.top_k = config.num_experts_per_tok;
  p.norm_topk_prob = config.norm_topk_prob;
  p.routed_scaling_factor = config.routed_scaling_factor;
  return p;
}

std::vector<ExpertChoice> route_noaux_tc(std::span<const double> scores,
                                         std::span<const double> bias, const RoutingParams& p) {
  HYMOE_CHECK(p.n_experts > 0 && static_cast<int64_t>(scores.size()) == p.n_experts &&
                  static_cast<int64_t>(bias.size()) == p.n_experts,
              kInvalidArgument, "routing: {} scores and {} biases for {} experts", scores.size(),
              bias.size(), p.n_experts);
  HYMOE_CHECK(p.n_group > 0 && p.n_experts % p.n_group == 0, kInvalidArgument,
              "routing: n_group {} does not divide {} experts", p.n_group, p.n_experts);
  const int64_t per_group = p.n_experts / p.n_group;
  HYMOE_CHECK(p.n_group == 1 || per_group >= 2, kInvalidArgument,
              "routing: groups of {} experts (group scores need 2)", per_group);
  HYMOE_CHECK(p.topk_group > 0 && p.topk_group <= p.n_group, kInvalidArgument,
              "routing: topk_group {} of {} groups", p.topk_group, p.n_group);
  HYMOE_CHECK(p.top_k > 0 && p.top_k <= p.topk_group * per_group, kInvalidArgument,
              "routing: top_k {} exceeds the {} experts of the kept groups", p.top_k,
              p.topk_group * per_group);

  std::vector<double> choice(scores.size());
  for (size_t e = 0; e < scores.size(); ++e) choice[e] = scores[e] + bias[e];

  // Group scores: sum of the two best choices in each group (all of the group's best when the
  // single group is the whole set, which then keeps everything anyway).
  std::vector<double> group_score(static_cast<size_t>(p.n_group));
  for (int64_t g = 0; g < p.n_group; ++g) {
    std::span<const double> members(choice.data() + g * per_group, static_cast<size_t>(per_group));
    const std::vector<int64_t> best = order_desc(members);
    group_score[g] = members[best[0]] + (per_group > 1 ? members[best[1]] : 0.0);
  }
  const std::vector<int64_t> group_order = order_desc(group_score);
  std::vector<bool> group_kept(static_cast<size_t>(p.n_group), false);
  for (int64_t k = 0; k < p.topk_group; ++k) group_kept[group_order[k]] = true;

  // Candidates: experts of kept groups, by decreasing choice, ties to the lower index.
  std::vector<int64_t> candidates;
  for (int64_t e = 0; e < p.n_experts; ++e) {
    if (group_kept[e / per_group]) candidates.push_back(e);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });

  std::vector<ExpertChoice> out(static_cast<size_t>(p.top_k));
  double sum = 0.0;
  for (int64_t k = 0; k < p.top_k; ++k) {
    out[k].expert = candidates[k];
    out[k].weight = scores[candidates[k]];
    sum += out[k].weight;
  }
  for (ExpertChoice& c : out) {
    if (p.norm_topk_prob) c.weight /= sum + 1e-20;
    c.weight *= p.routed_scaling_factor;
  }
  return out;
}

}  // namespace hymoe::reference
