#include "hymoe/model/presets.h"

#include <algorithm>

#include "hymoe/common/error.h"

namespace hymoe {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.model_type = "deepseek_v3";
  c.vocab_size = 129280;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.moe_intermediate_size = 256;
  c.num_hidden_layers = 3;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.q_lora_rank = 256;
  c.kv_lora_rank = 256;
  c.qk_nope_head_dim = 64;
  c.qk_rope_head_dim = 32;
  c.v_head_dim = 64;
  c.n_routed_experts = 16;
  c.num_experts_per_tok = 4;
  c.n_group = 4;
  c.topk_group = 2;
  c.n_shared_experts = 1;
  c.routed_scaling_factor = 2.5;
  c.rope_scaling = YarnScaling{40.0, 4096, 32.0, 1.0, 1.0, 1.0};
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 163840;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

ModelConfig deepseek_v3() {
  ModelConfig c;  // the defaults are DeepSeek-V3's values
  c.rope_scaling = YarnScaling{40.0, 4096, 32.0, 1.0, 1.0, 1.0};
  return c;
}

ModelConfig kimi_k2() {
  ModelConfig c;
  c.model_type = "kimi_k2";
  c.vocab_size = 163840;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 64;
  c.n_routed_experts = 384;
  c.first_k_dense_replace = 1;
  c.n_group = 1;
  c.topk_group = 1;
  c.routed_scaling_factor = 2.827;
  c.rope_theta = 50000.0;
  c.max_position_embeddings = 131072;
  c.rope_scaling = YarnScaling{32.0, 4096, 1.0, 1.0, 1.0, 1.0};
  c.bos_token_id = 163584;
  c.eos_token_id = 163585;
  return c;
}

}  // namespace

std::vector<std::string> preset_names() { return {"tiny", "deepseek-v3", "kimi-k2"}; }

ModelConfig preset_config(std::string_view name, int layers) {
  ModelConfig c;
  if (name == "tiny") {
    c = tiny();
  } else if (name == "deepseek-v3") {
    c = deepseek_v3();
  } else if (name == "kimi-k2") {
    c = kimi_k2();
  } else {
    HYMOE_THROW(kInvalidArgument, "unknown model preset '{}' (tiny, deepseek-v3, kimi-k2)", name);
  }
  c.num_nextn_predict_layers = 0;
  HYMOE_CHECK(layers == -1 || layers > 0, kInvalidArgument,
              "preset '{}': layers must be positive (or -1 for the preset's own), got {}", name,
              layers);
  if (layers > 0) {
    c.num_hidden_layers = layers;
    c.first_k_dense_replace = std::min<int64_t>(c.first_k_dense_replace, layers - 1);
  }
  c.validate(name);
  return c;
}

}  // namespace hymoe
