#include "reference_model.h"

#include <string>

#include "hymoe/common/error.h"
#include "linear.h"
#include "mlp.h"
#include "rmsnorm.h"

namespace hymoe::reference {
namespace {

const ModelConfig& config_of(const ModelWeights& w) {
  HYMOE_CHECK(w.config != nullptr, kInvalidArgument, "ModelWeights without a config");
  return *w.config;
}

void check_fp8(const Fp8Matrix& m, const std::string& name, int64_t rows, int64_t cols) {
  HYMOE_CHECK(m.data != nullptr && m.scale_inv != nullptr, kInvalidArgument,
              "{}: FP8 weight or its scale_inv is missing", name);
  HYMOE_CHECK(m.rows == rows && m.cols == cols, kInvalidArgument,
              "{}: shape [{}, {}], config says [{}, {}]", name, m.rows, m.cols, rows, cols);
}

void check_dense(const DenseMatrix& m, const std::string& name, int64_t rows, int64_t cols) {
  HYMOE_CHECK(m.data != nullptr, kInvalidArgument, "{}: tensor is missing", name);
  HYMOE_CHECK(m.dtype == DType::kBF16 || m.dtype == DType::kF16 || m.dtype == DType::kF32,
              kInvalidArgument, "{}: dtype is not BF16, F16 or F32", name);
  HYMOE_CHECK(m.rows == rows && m.cols == cols, kInvalidArgument,
              "{}: shape [{}, {}], config says [{}, {}]", name, m.rows, m.cols, rows, cols);
}

void check_mlp(const MlpWeights& m, const std::string& name, int64_t hidden, int64_t inter) {
  check_fp8(m.gate, name + ".gate_proj", inter, hidden);
  check_fp8(m.up, name + ".up_proj", inter, hidden);
  check_fp8(m.down, name + ".down_proj", hidden, inter);
}

}  // namespace

ReferenceModel::ReferenceModel(const ModelWeights& weights)
    : weights_(weights),
      config_(config_of(weights)),
      rope_(config_),
      routing_(RoutingParams::from_config(config_)) {
  check_weights();
}

void ReferenceModel::check_weights() const {
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  const int64_t hidden = c.hidden_size;
  check_dense(w.embed, "model.embed_tokens.weight", c.vocab_size, hidden);
  check_dense(w.final_norm, "model.norm.weight", 1, hidden);
  check_dense(w.lm_head, "lm_head.weight", c.vocab_size, hidden);
  HYMOE_CHECK(static_cast<int64_t>(w.layers.size()) == c.num_hidden_layers, kInvalidArgument,
              "{} layers bound, config has {}", w.layers.size(), c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l);
    check_dense(lw.input_norm, p + ".input_layernorm.weight", 1, hidden);
    check_dense(lw.post_attn_norm, p + ".post_attention_layernorm.weight", 1, hidden);
    const AttentionWeights& a = lw.attn;
    const std::string ap = p + ".self_attn";
    check_fp8(a.q_a, ap + ".q_a_proj.weight", c.q_lora_rank, hidden);
    check_dense(a.q_a_norm, ap + ".q_a_layernorm.weight", 1, c.q_lora_rank);
    check_fp8(a.q_b, ap + ".q_b_proj.weight", c.num_attention_heads * c.qk_head_dim(),
              c.q_lora_rank);
    check_fp8(a.kv_a_with_mqa, ap + ".kv_a_proj_with_mqa.weight",
              c.kv_lora_rank + c.qk_rope_head_dim, hidden);
    check_dense(a.kv_a_norm, ap + ".kv_a_layernorm.weight", 1, c.kv_lora_rank);
    check_fp8(a.kv_b, ap + ".kv_b_proj.weight",
              c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    check_fp8(a.o, ap + ".o_proj.weight", hidden, c.num_attention_heads * c.v_head_dim);
    if (c.is_moe_layer(l)) {
      HYMOE_CHECK(lw.moe.has_value() && !lw.dense.has_value(), kInvalidArgument,
                  "{}: config makes it an MoE layer, weights are not", p);
      const MoeWeights& m = *lw.moe;
      check_dense(m.router, p + ".mlp.gate.weight", c.n_routed_experts, hidden);
      check_dense(m.router_bias, p + ".mlp.gate.e_score_correction_bias", 1, c.n_routed_experts);
      HYMOE_CHECK(static_cast<int64_t>(m.experts.size()) == c.n_routed_experts, kInvalidArgument,
                  "{}: {} routed experts bound, config has {}", p, m.experts.size(),
                  c.n_routed_experts);
      for (size_t e = 0; e < m.experts.size(); ++e) {
        check_mlp(m.experts[e], p + ".mlp.experts." + std::to_string(e), hidden,
                  c.moe_intermediate_size);
      }
      HYMOE_CHECK(m.shared.has_value() == (c.n_shared_experts > 0), kInvalidArgument,
                  "{}: shared expert presence disagrees with n_shared_experts {}", p,
                  c.n_shared_experts);
      if (m.shared) {
        check_mlp(*m.shared, p + ".mlp.shared_experts", hidden,
                  c.n_shared_experts * c.moe_intermediate_size);
      }
    } else {
      HYMOE_CHECK(lw.dense.has_value() && !lw.moe.has_value(), kInvalidArgument,
                  "{}: config makes it a dense layer, weights are not", p);
      check_mlp(*lw.dense, p + ".mlp", hidden, c.intermediate_size);
    }
  }
}

LatentKvCache ReferenceModel::new_cache() const {
  return LatentKvCache(config_.num_hidden_layers, config_.kv_lora_rank, config_.qk_rope_head_dim);
}

std::vector<float> ReferenceModel::forward(std::span<const int64_t> tokens, int64_t start_pos,
                                           LatentKvCache& cache, MlaForm form) const {
  const ModelConfig& c = config_;
  HYMOE_CHECK(!tokens.empty(), kInvalidArgument, "no tokens to run");
  for (size_t i = 0; i < tokens.size(); ++i) {
    HYMOE_CHECK(tokens[i] >= 0 && tokens[i] < c.vocab_size, kInvalidArgument,
                "token {} at index {} is outside the vocabulary [0, {})", tokens[i], i,
                c.vocab_size);
  }
  HYMOE_CHECK(cache.layers() == c.num_hidden_layers && cache.kv_lora_rank() == c.kv_lora_rank &&
                  cache.rope_dim() == c.qk_rope_head_dim,
              kInvalidArgument, "KV cache of another model shape");
  for (int64_t l = 0; l < cache.layers(); ++l) {
    HYMOE_CHECK(cache.tokens(l) == cache.size(), kInvalidArgument,
                "KV cache is inconsistent: layer {} holds {} tokens, the last layer {}", l,
                cache.tokens(l), cache.size());
  }
  HYMOE_CHECK(start_pos == cache.size(), kInvalidArgument,
              "start position {} but the cache holds {} tokens", start_pos, cache.size());

  const int64_t n = static_cast<int64_t>(tokens.size());
  const size_t hidden = static_cast<size_t>(c.hidden_size);
  std::vector<std::vector<float>> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) h[i] = dense_row(weights_.embed, tokens[i]);

  std::vector<float> normed(hidden), delta(hidden);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = weights_.layers[static_cast<size_t>(l)];
    // Attention: every new token's latent goes into the cache first, then each token attends
    // causally to the positions up to its own.
    std::vector<std::vector<float>> queries(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      rmsnorm(h[i], lw.input_norm, c.rms_norm_eps, normed);
      const MlaLatent latent = mla_latent(lw.attn, c, rope_, normed, start_pos + i);
      cache.append(l, latent.c_kv, latent.k_pe);
      queries[i] = mla_query(lw.attn, c, rope_, normed, start_pos + i);
    }
    for (int64_t i = 0; i < n; ++i) {
      mla_attend(lw.attn, c, rope_, queries[i], cache, l, start_pos + i + 1, form, delta);
      for (size_t k = 0; k < hidden; ++k) h[i][k] += delta[k];
    }
    // Feed-forward.
    for (int64_t i = 0; i < n; ++i) {
      rmsnorm(h[i], lw.post_attn_norm, c.rms_norm_eps, normed);
      if (lw.moe) {
        moe(*lw.moe, routing_, normed, delta);
      } else {
        mlp(*lw.dense, normed, delta);
      }
      for (size_t k = 0; k < hidden; ++k) h[i][k] += delta[k];
    }
  }

  const size_t vocab = static_cast<size_t>(c.vocab_size);
  std::vector<float> logits(static_cast<size_t>(n) * vocab);
  for (int64_t i = 0; i < n; ++i) {
    rmsnorm(h[i], weights_.final_norm, c.rms_norm_eps, normed);
    linear(weights_.lm_head, normed, std::span<float>(logits).subspan(i * vocab, vocab));
  }
  return logits;
}

std::vector<float> ReferenceModel::forward(std::span<const int64_t> tokens, MlaForm form) const {
  LatentKvCache cache = new_cache();
  return forward(tokens, 0, cache, form);
}

}  // namespace hymoe::reference
