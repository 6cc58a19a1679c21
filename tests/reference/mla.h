// Multi-head latent attention (MLA) of DeepSeek-V3, in its two mathematically equal forms.
//
// Per token x (already input-normed):
//   q      = q_b(rmsnorm(q_a x, q_a_norm))           -> per head [q_nope (nope) | q_pe (rope)]
//   [c | k_pe] = kv_a_with_mqa x; c_kv = rmsnorm(c, kv_a_norm)   (cached, kv_lora_rank)
//   q_pe, k_pe roped at the token's position               (k_pe shared by all heads, cached)
// kv_b rows of head h: [W_UK[h] (nope rows) | W_UV[h] (v_head rows)], each [., kv_lora_rank].
// Naive form:    k_nope[h](t) = W_UK[h] c_kv(t), v[h](t) = W_UV[h] c_kv(t);
//                score = (q_nope . k_nope + q_pe . k_pe) * softmax_scale; o[h] = sum p v[h].
// Absorbed form: q_lat[h] = W_UK[h]^T q_nope[h]; score = (q_lat . c_kv + q_pe . k_pe) * scale;
//                o[h] = W_UV[h] (sum p c_kv).
// Both: out = o_proj(concat_h o[h]). Attention is causal over the cache's tokens [0, ctx).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hymoe/model/model_weights.h"
#include "latent_kv_cache.h"
#include "yarn_rope.h"

namespace hymoe::reference {

enum class MlaForm { kNaive, kAbsorbed };

// What one token contributes to the cache: normalised c_kv and roped k_pe.
struct MlaLatent {
  std::vector<float> c_kv;  // [kv_lora_rank]
  std::vector<float> k_pe;  // [qk_rope_head_dim]
};

// The token's latent KV entry at position pos.
MlaLatent mla_latent(const AttentionWeights& w, const ModelConfig& config, const YarnRope& rope,
                     std::span<const float> x, int64_t pos);

// The token's queries [heads, qk_nope + qk_rope] with the rope part roped at pos.
std::vector<float> mla_query(const AttentionWeights& w, const ModelConfig& config,
                             const YarnRope& rope, std::span<const float> x, int64_t pos);

// Attention of query q over tokens [0, ctx) of `layer` in the cache, then o_proj into out
// [hidden]. Throws hymoe::Error (kInvalidArgument) when ctx is 0 or beyond the cache.
void mla_attend(const AttentionWeights& w, const ModelConfig& config, const YarnRope& rope,
                std::span<const float> q, const LatentKvCache& cache, int64_t layer, int64_t ctx,
                MlaForm form, std::span<float> out);

}  // namespace hymoe::reference
