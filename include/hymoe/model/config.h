// config.json of a DeepseekV3ForCausalLM checkpoint (DeepSeek-V3/R1/V3.1, Kimi-K2).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "hymoe/kernels/rope.h"

namespace hymoe {

// rope_scaling of type "yarn": the RoPE kernel's own parameter view (as Fp8Matrix is the FP8
// kernels' view), so the config's values go to the kernel as they are.
using YarnScaling = kernels::YarnParams;

// quantization_config: fp8 e4m3 with [128, 128] weight blocks is the only supported form.
struct Fp8Quantization {
  std::string fmt = "e4m3";
  int64_t block_n = 128;  // rows per scale block
  int64_t block_k = 128;  // columns per scale block
};

struct ModelConfig {
  std::string architecture = "DeepseekV3ForCausalLM";
  std::string model_type = "deepseek_v3";
  int64_t vocab_size = 129280;
  int64_t hidden_size = 7168;
  int64_t intermediate_size = 18432;      // dense MLP layers
  int64_t moe_intermediate_size = 2048;   // each routed and shared expert
  int64_t num_hidden_layers = 61;
  int64_t num_nextn_predict_layers = 1;   // MTP layers stored after the hidden layers (ignored)
  int64_t num_attention_heads = 128;
  int64_t num_key_value_heads = 128;
  int64_t n_shared_experts = 1;
  int64_t n_routed_experts = 256;
  int64_t num_experts_per_tok = 8;
  int64_t n_group = 8;
  int64_t topk_group = 4;
  int64_t first_k_dense_replace = 3;
  int64_t moe_layer_freq = 1;
  double routed_scaling_factor = 2.5;
  bool norm_topk_prob = true;
  std::string scoring_func = "sigmoid";
  std::string topk_method = "noaux_tc";
  int64_t q_lora_rank = 1536;
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
  int64_t max_position_embeddings = 163840;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<YarnScaling> rope_scaling = YarnScaling{};
  std::optional<Fp8Quantization> quantization = Fp8Quantization{};
  bool tie_word_embeddings = false;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;

  // ---- derived values
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int64_t layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
  // Softmax scale of attention: qk_head_dim^-0.5, times mscale^2 under YaRN (DeepSeek's form).
  double softmax_scale() const;

  // Parses and validates; throws hymoe::Error naming the field for unknown architectures,
  // missing or ill-typed fields, and inconsistent values (e.g. n_group not dividing the experts).
  static ModelConfig from_json(const nlohmann::json& j, std::string_view source = "config.json");
  static ModelConfig load(const std::filesystem::path& config_json);
  nlohmann::json to_json() const;
  // Throws hymoe::Error (kInvalidArgument / kUnsupported) when values are inconsistent.
  void validate(std::string_view source = "config") const;
};

}  // namespace hymoe
