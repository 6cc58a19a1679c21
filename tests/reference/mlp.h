// Feed-forward blocks: the SiLU-gated MLP (dense layers, shared and routed experts) and the MoE
// block (router -> noaux_tc routing -> weighted routed experts + shared expert).
#pragma once

#include <span>
#include <vector>

#include "hymoe/model/model_weights.h"
#include "routing.h"

namespace hymoe::reference {

// out = down(silu(gate x) * up x); the intermediate is stored in float. Throws hymoe::Error
// (kInvalidArgument) on shape mismatch.
void mlp(const MlpWeights& w, std::span<const float> x, std::span<float> out);

// Router scores of one token: sigmoid(router x), router in float as HF does.
std::vector<double> router_scores(const MoeWeights& w, std::span<const float> x);

// out = sum_k weight_k * expert_k(x) + shared(x). When `chosen` is not null it receives the
// routing decision (for tests and for comparing engines).
void moe(const MoeWeights& w, const RoutingParams& routing, std::span<const float> x,
         std::span<float> out, std::vector<ExpertChoice>* chosen = nullptr);

}  // namespace hymoe::reference
