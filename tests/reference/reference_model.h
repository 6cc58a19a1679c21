// The reference forward pass of DeepseekV3ForCausalLM: plain scalar code, float32 storage and
// float64 accumulation, reading weights through ModelWeights (FP8 dequantised on the fly with
// the 128x128 scale_inv blocks). The oracle every optimised path is compared with.
//
//   h = embed[token]
//   per layer: h += mla(rmsnorm(h, input_norm));  h += ffn(rmsnorm(h, post_attn_norm))
//              (ffn = dense MLP for the first_k_dense_replace layers, MoE after)
//   logits = lm_head(rmsnorm(h, final_norm))
//
// Pieces: linear.h (weights), rmsnorm.h, yarn_rope.h, mla.h (both forms), routing.h, mlp.h,
// latent_kv_cache.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hymoe/model/model_weights.h"
#include "latent_kv_cache.h"
#include "mla.h"
#include "routing.h"
#include "yarn_rope.h"

namespace hymoe::reference {

class ReferenceModel {
 public:
  // Checks every view of `weights` against its config (presence, shape, dtype) and throws
  // hymoe::Error (kInvalidArgument) naming the first bad tensor. `weights` (and the store and
  // config behind it) must outlive the model.
  explicit ReferenceModel(const ModelWeights& weights);

  ReferenceModel(const ReferenceModel&) = delete;
  ReferenceModel& operator=(const ReferenceModel&) = delete;

  const ModelConfig& config() const { return config_; }
  const YarnRope& rope() const { return rope_; }

  // An empty cache for one sequence of this model.
  LatentKvCache new_cache() const;

  // Runs `tokens` at positions start_pos .. start_pos + n - 1, attending to everything the cache
  // holds before them, and appends their latents to the cache. Returns the logits of every new
  // position, [n, vocab] row-major. start_pos must equal cache.size(). Throws hymoe::Error
  // (kInvalidArgument), before touching the cache, for an empty span, a token outside
  // [0, vocab), a start_pos that is not the cache's length, or a cache of another shape.
  std::vector<float> forward(std::span<const int64_t> tokens, int64_t start_pos,
                             LatentKvCache& cache, MlaForm form) const;

  // The whole sequence from scratch (a fresh cache): logits [n, vocab].
  std::vector<float> forward(std::span<const int64_t> tokens, MlaForm form) const;

 private:
  void check_weights() const;

  const ModelWeights& weights_;
  const ModelConfig& config_;
  YarnRope rope_;
  RoutingParams routing_;
};

}  // namespace hymoe::reference
