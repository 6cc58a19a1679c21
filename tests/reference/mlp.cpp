#include "mlp.h"

#include <cmath>

#include "hymoe/common/error.h"
#include "linear.h"

namespace hymoe::reference {

void mlp(const MlpWeights& w, std::span<const float> x, std::span<float> out) {
  HYMOE_CHECK(w.gate.rows == w.up.rows && w.gate.cols == w.up.cols && w.down.cols == w.gate.rows,
              kInvalidArgument, "mlp: gate [{}, {}], up [{}, {}], down [{}, {}] do not chain",
              w.gate.rows, w.gate.cols, w.up.rows, w.up.cols, w.down.rows, w.down.cols);
  const size_t inter = static_cast<size_t>(w.gate.rows);
  std::vector<float> gate(inter), up(inter);
  linear(w.gate, x, gate);
  linear(w.up, x, up);
  for (size_t i = 0; i < inter; ++i) {
    const double g = gate[i];
    gate[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * static_cast<double>(up[i]));
  }
  linear(w.down, gate, out);
}

std::vector<double> router_scores(const MoeWeights& w, std::span<const float> x) {
  std::vector<float> logits(static_cast<size_t>(w.router.rows));
  linear(w.router, x, logits);
  std::vector<double> scores(logits.size());
  for (size_t e = 0; e < logits.size(); ++e) scores[e] = 1.0 / (1.0 + std::exp(-double{logits[e]}));
  return scores;
}

void moe(const MoeWeights& w, const RoutingParams& routing, std::span<const float> x,
         std::span<float> out, std::vector<ExpertChoice>* chosen) {
  HYMOE_CHECK(static_cast<int64_t>(w.experts.size()) == routing.n_experts &&
                  w.router.rows == routing.n_experts &&
                  w.router_bias.rows * w.router_bias.cols == routing.n_experts,
              kInvalidArgument, "moe: {} experts, router of {} rows and {} biases for {} experts",
              w.experts.size(), w.router.rows, w.router_bias.rows * w.router_bias.cols,
              routing.n_experts);
  const std::vector<double> scores = router_scores(w, x);
  std::vector<double> bias(scores.size());
  for (size_t e = 0; e < bias.size(); ++e) {
    bias[e] = dense_at(w.router_bias, 0, static_cast<int64_t>(e));
  }
  const std::vector<ExpertChoice> picks = route_noaux_tc(scores, bias, routing);

  std::vector<double> acc(out.size(), 0.0);
  std::vector<float> y(out.size());
  for (const ExpertChoice& c : picks) {
    mlp(w.experts[static_cast<size_t>(c.expert)], x, y);
    for (size_t i = 0; i < y.size(); ++i) acc[i] += c.weight * static_cast<double>(y[i]);
  }
  if (w.shared) {
    mlp(*w.shared, x, y);
    for (size_t i = 0; i < y.size(); ++i) acc[i] += static_cast<double>(y[i]);
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(acc[i]);
  if (chosen != nullptr) *chosen = picks;
}

}  // namespace hymoe::reference
