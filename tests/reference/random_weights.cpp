#include "random_weights.h"

#include <algorithm>
#include <cmath>

#include "hymoe/common/numeric.h"

namespace hymoe::reference::testing {

ModelConfig tiny_test_config(int64_t vocab) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.moe_intermediate_size = 256;
  c.num_hidden_layers = 3;
  c.num_nextn_predict_layers = 0;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.n_shared_experts = 1;
  c.n_routed_experts = 16;
  c.num_experts_per_tok = 4;
  c.n_group = 4;
  c.topk_group = 2;
  c.first_k_dense_replace = 1;
  c.routed_scaling_factor = 2.5;
  c.q_lora_rank = 256;
  c.kv_lora_rank = 256;
  c.qk_nope_head_dim = 64;
  c.qk_rope_head_dim = 32;
  c.v_head_dim = 64;
  c.rope_scaling = YarnScaling{40.0, 4096, 32.0, 1.0, 1.0, 1.0};
  return c;
}

RandomWeights::RandomWeights(const ModelConfig& config, uint64_t seed)
    : config_(std::make_unique<ModelConfig>(config)), rng_(seed) {
  const ModelConfig& c = *config_;
  const int64_t hidden = c.hidden_size;
  const double in_std = 1.0 / std::sqrt(static_cast<double>(hidden));
  weights_.config = config_.get();
  weights_.embed = bf16(c.vocab_size, hidden, 0.0, 1.0);
  weights_.final_norm = bf16(1, hidden, 1.0, 0.1);
  weights_.lm_head = bf16(c.vocab_size, hidden, 0.0, in_std);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights lw;
    lw.input_norm = bf16(1, hidden, 1.0, 0.1);
    lw.post_attn_norm = bf16(1, hidden, 1.0, 0.1);
    AttentionWeights& a = lw.attn;
    a.q_a = fp8(c.q_lora_rank, hidden, in_std);
    a.q_a_norm = bf16(1, c.q_lora_rank, 1.0, 0.1);
    a.q_b = fp8(c.num_attention_heads * c.qk_head_dim(), c.q_lora_rank,
                1.0 / std::sqrt(static_cast<double>(c.q_lora_rank)));
    a.kv_a_with_mqa = fp8(c.kv_lora_rank + c.qk_rope_head_dim, hidden, in_std);
    a.kv_a_norm = bf16(1, c.kv_lora_rank, 1.0, 0.1);
    a.kv_b = fp8(c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank,
                 1.0 / std::sqrt(static_cast<double>(c.kv_lora_rank)));
    a.o = fp8(hidden, c.num_attention_heads * c.v_head_dim,
              1.0 / std::sqrt(static_cast<double>(c.num_attention_heads * c.v_head_dim)));
    if (c.is_moe_layer(l)) {
      MoeWeights m;
      m.router = bf16(c.n_routed_experts, hidden, 0.0, in_std);
      m.router_bias = f32(1, c.n_routed_experts, 0.0, 0.05);
      if (c.n_shared_experts > 0) m.shared = mlp(hidden, c.n_shared_experts * c.moe_intermediate_size);
      for (int64_t e = 0; e < c.n_routed_experts; ++e) {
        m.experts.push_back(mlp(hidden, c.moe_intermediate_size));
      }
      lw.moe = std::move(m);
    } else {
      lw.dense = mlp(hidden, c.intermediate_size);
    }
    weights_.layers.push_back(std::move(lw));
  }
}

MlpWeights RandomWeights::mlp(int64_t hidden, int64_t inter) {
  MlpWeights m;
  m.gate = fp8(inter, hidden, 1.0 / std::sqrt(static_cast<double>(hidden)));
  m.up = fp8(inter, hidden, 1.0 / std::sqrt(static_cast<double>(hidden)));
  m.down = fp8(hidden, inter, 1.0 / std::sqrt(static_cast<double>(inter)));
  return m;
}

Fp8Matrix RandomWeights::fp8(int64_t rows, int64_t cols, double stddev) {
  Fp8Matrix m;
  m.rows = rows;
  m.cols = cols;
  std::vector<uint8_t>& data = bytes_.emplace_back(static_cast<size_t>(rows * cols));
  std::vector<float>& scales =
      floats_.emplace_back(static_cast<size_t>(m.scale_rows() * m.scale_cols()));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> spread(0.5, 2.0);
  std::vector<float> block;
  for (int64_t br = 0; br < m.scale_rows(); ++br) {
    for (int64_t bc = 0; bc < m.scale_cols(); ++bc) {
      const double sd = stddev * spread(rng_);
      const int64_t r0 = br * Fp8Matrix::kBlock, r1 = std::min(rows, r0 + Fp8Matrix::kBlock);
      const int64_t c0 = bc * Fp8Matrix::kBlock, c1 = std::min(cols, c0 + Fp8Matrix::kBlock);
      block.clear();
      float amax = 0.0f;
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j = c0; j < c1; ++j) {
          block.push_back(static_cast<float>(normal(rng_) * sd));
          amax = std::max(amax, std::fabs(block.back()));
        }
      }
      const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
      scales[static_cast<size_t>(br * m.scale_cols() + bc)] = scale;
      size_t k = 0;
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j = c0; j < c1; ++j) data[i * cols + j] = float_to_fp8_e4m3(block[k++] / scale);
      }
    }
  }
  m.data = data.data();
  m.scale_inv = scales.data();
  return m;
}

DenseMatrix RandomWeights::bf16(int64_t rows, int64_t cols, double mean, double stddev) {
  std::vector<uint16_t>& v = halves_.emplace_back(static_cast<size_t>(rows * cols));
  std::normal_distribution<double> normal(mean, stddev);
  for (uint16_t& x : v) x = float_to_bf16(static_cast<float>(normal(rng_)));
  return DenseMatrix{DType::kBF16, v.data(), rows, cols};
}

DenseMatrix RandomWeights::f32(int64_t rows, int64_t cols, double mean, double stddev) {
  std::vector<float>& v = floats_.emplace_back(static_cast<size_t>(rows * cols));
  std::normal_distribution<double> normal(mean, stddev);
  for (float& x : v) x = static_cast<float>(normal(rng_));
  return DenseMatrix{DType::kF32, v.data(), rows, cols};
}

}  // namespace hymoe::reference::testing
