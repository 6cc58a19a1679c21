#include "hymoe/engine/layer_sequence.h"

#include <chrono>

#include "hymoe/model/model_weights.h"

namespace hymoe {

void run_layers(const ModelWeights& weights, LayerOps& ops, LayerTimes* times) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const int64_t li = static_cast<int64_t>(i);
    const bool dense = weights.layers[i].dense.has_value();
    const auto t0 = Clock::now();
    ops.attention(li);
    const auto t1 = Clock::now();
    ops.ffn_input(li);
    if (dense) {
      ops.dense_mlp(li);
    } else {
      ops.router(li);
      ops.shared_expert(li);
      ops.routed_experts(li);
    }
    ops.ffn_residual(li);
    if (times) {
      const auto t2 = Clock::now();
      times->attention_s += seconds(t0, t1);
      (dense ? times->dense_s : times->moe_s) += seconds(t1, t2);
    }
  }
}

void run_layers_interleaved(const ModelWeights& weights, std::span<LayerOps* const> lanes) {
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const int64_t li = static_cast<int64_t>(i);
    const bool dense = weights.layers[i].dense.has_value();
    for (LayerOps* ops : lanes) {
      ops->attention(li);
      ops->ffn_input(li);
      if (dense) {
        ops->dense_mlp(li);
        ops->ffn_residual(li);
      } else {
        ops->router(li);
        ops->shared_expert(li);
      }
    }
    if (dense) continue;
    for (LayerOps* ops : lanes) {
      ops->routed_experts(li);
      ops->ffn_residual(li);
    }
  }
}

}  // namespace hymoe
