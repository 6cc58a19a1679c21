#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "hymoe/model/config.h"
#include "hymoe/model/presets.h"
#include "test_util.h"

namespace hymoe {
namespace {

using nlohmann::json;
using test::expect_error;

// config.json of deepseek-ai/DeepSeek-V3 (as published; auto_map and a few inert keys trimmed).
const char* kDeepSeekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
  "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
  "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
  "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                          "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
  "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
  "v_head_dim": 128, "vocab_size": 129280})";

// config.json of moonshotai/Kimi-K2-Instruct (auto_map trimmed).
const char* kKimiK2 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 163584, "eos_token_id": 163585, "first_k_dense_replace": 1,
  "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 131072,
  "model_type": "kimi_k2", "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 1,
  "n_routed_experts": 384, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 64, "num_nextn_predict_layers": 0, "pretraining_tp": 1,
  "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                          "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid",
  "tie_word_embeddings": false, "topk_group": 1, "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16", "use_cache": true, "v_head_dim": 128, "vocab_size": 163840})";

TEST(ModelConfig, ParsesDeepSeekV3) {
  ModelConfig c = ModelConfig::from_json(json::parse(kDeepSeekV3));
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.qk_head_dim(), 192);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 40.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096);
  ASSERT_TRUE(c.quantization.has_value());
  EXPECT_EQ(c.quantization->block_n, 128);
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_TRUE(c.is_moe_layer(60));
}

TEST(ModelConfig, ParsesKimiK2) {
  ModelConfig c = ModelConfig::from_json(json::parse(kKimiK2));
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.827);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.eos_token_id, 163585);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
}

TEST(ModelConfig, EosTokenListTakesFirst) {
  json j = json::parse(kDeepSeekV3);
  j["eos_token_id"] = json::array({1, 2});
  EXPECT_EQ(ModelConfig::from_json(j).eos_token_id, 1);
}

TEST(ModelConfig, PresetsMatchPublishedConfigs) {
  ModelConfig v3 = ModelConfig::from_json(json::parse(kDeepSeekV3));
  v3.num_nextn_predict_layers = 0;  // presets carry no MTP module
  EXPECT_EQ(preset_config("deepseek-v3").to_json(), v3.to_json());
  ModelConfig kimi = ModelConfig::from_json(json::parse(kKimiK2));
  EXPECT_EQ(preset_config("kimi-k2").to_json(), kimi.to_json());
}

TEST(ModelConfig, TinyPresetIsExactly) {
  ModelConfig c = preset_config("tiny");
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 3);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_EQ(c.intermediate_size, 512);
  EXPECT_EQ(c.moe_intermediate_size, 256);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.q_lora_rank, 256);
  EXPECT_EQ(c.kv_lora_rank, 256);
  EXPECT_EQ(c.qk_nope_head_dim, 64);
  EXPECT_EQ(c.qk_rope_head_dim, 32);
  EXPECT_EQ(c.v_head_dim, 64);
  EXPECT_EQ(c.n_routed_experts, 16);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.n_group, 4);
  EXPECT_EQ(c.topk_group, 2);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 40.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope_scaling->beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling->beta_slow, 1.0);
  EXPECT_EQ(c.rope_scaling->mscale, 1.0);
  EXPECT_EQ(c.rope_scaling->mscale_all_dim, 1.0);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.max_position_embeddings, 163840);
  EXPECT_EQ(c.num_nextn_predict_layers, 0);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(2));
}

TEST(ModelConfig, PresetLayersOverride) {
  ModelConfig one = preset_config("deepseek-v3", 1);
  EXPECT_EQ(one.num_hidden_layers, 1);
  EXPECT_EQ(one.first_k_dense_replace, 0);
  EXPECT_TRUE(one.is_moe_layer(0));
  ModelConfig five = preset_config("deepseek-v3", 5);
  EXPECT_EQ(five.first_k_dense_replace, 3);
  EXPECT_EQ(preset_config("kimi-k2", 2).first_k_dense_replace, 1);
  expect_error([] { preset_config("llama"); }, ErrorKind::kInvalidArgument, {"llama"});
  expect_error([] { preset_config("tiny", 0); }, ErrorKind::kInvalidArgument, {"layers"});
}

TEST(ModelConfig, JsonRoundTrip) {
  for (const std::string& name : preset_names()) {
    ModelConfig c = preset_config(name);
    ModelConfig back = ModelConfig::from_json(c.to_json());
    EXPECT_EQ(back.to_json(), c.to_json()) << name;
  }
  json j = preset_config("tiny").to_json();
  EXPECT_EQ(j["architectures"], json::array({"DeepseekV3ForCausalLM"}));
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  EXPECT_EQ(j["rope_scaling"]["type"], "yarn");
  EXPECT_EQ(j["quantization_config"]["quant_method"], "fp8");
  EXPECT_EQ(j["quantization_config"]["activation_scheme"], "dynamic");
  EXPECT_EQ(j["quantization_config"]["weight_block_size"], json::array({128, 128}));
}

TEST(ModelConfig, SoftmaxScale) {
  ModelConfig c = preset_config("tiny");
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_DOUBLE_EQ(c.softmax_scale(), m * m / std::sqrt(96.0));
  ModelConfig v3 = preset_config("deepseek-v3");
  EXPECT_NEAR(v3.softmax_scale(), m * m / std::sqrt(192.0), 1e-15);
  c.rope_scaling->mscale_all_dim = 0.0;
  EXPECT_DOUBLE_EQ(c.softmax_scale(), 1.0 / std::sqrt(96.0));
  c.rope_scaling->mscale_all_dim = 0.707;
  const double m2 = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_DOUBLE_EQ(c.softmax_scale(), m2 * m2 / std::sqrt(96.0));
  c.rope_scaling.reset();
  EXPECT_DOUBLE_EQ(c.softmax_scale(), 1.0 / std::sqrt(96.0));
}

// Each bad config: a mutation of DeepSeek-V3's, the error kind, and words its message must hold.
struct BadCase {
  const char* what;
  void (*mutate)(json&);
  ErrorKind kind;
  std::vector<std::string> needles;
};

TEST(ModelConfig, ErrorsNameTheField) {
  const std::vector<BadCase> cases = {
      {"unknown architecture", [](json& j) { j["architectures"] = {"LlamaForCausalLM"}; },
       ErrorKind::kUnsupported, {"architectures", "LlamaForCausalLM"}},
      {"architectures not a list", [](json& j) { j["architectures"] = "DeepseekV3ForCausalLM"; },
       ErrorKind::kInvalidArgument, {"architectures"}},
      {"unknown model_type", [](json& j) { j["model_type"] = "qwen2"; }, ErrorKind::kUnsupported,
       {"model_type", "qwen2"}},
      {"hidden_size as string", [](json& j) { j["hidden_size"] = "7168"; },
       ErrorKind::kInvalidArgument, {"hidden_size", "integer"}},
      {"hidden_size as float", [](json& j) { j["hidden_size"] = 7168.5; },
       ErrorKind::kInvalidArgument, {"hidden_size"}},
      {"norm_topk_prob as int", [](json& j) { j["norm_topk_prob"] = 1; },
       ErrorKind::kInvalidArgument, {"norm_topk_prob"}},
      {"rms_norm_eps as string", [](json& j) { j["rms_norm_eps"] = "1e-6"; },
       ErrorKind::kInvalidArgument, {"rms_norm_eps"}},
      {"missing kv_lora_rank", [](json& j) { j.erase("kv_lora_rank"); },
       ErrorKind::kInvalidArgument, {"missing", "kv_lora_rank"}},
      {"missing vocab_size", [](json& j) { j.erase("vocab_size"); }, ErrorKind::kInvalidArgument,
       {"vocab_size"}},
      {"negative hidden_size", [](json& j) { j["hidden_size"] = -1; },
       ErrorKind::kInvalidArgument, {"hidden_size", "positive"}},
      {"n_group not dividing", [](json& j) { j["n_group"] = 7; }, ErrorKind::kInvalidArgument,
       {"n_group", "divide"}},
      {"topk_group > n_group", [](json& j) { j["topk_group"] = 9; }, ErrorKind::kInvalidArgument,
       {"topk_group"}},
      {"experts_per_tok > experts", [](json& j) { j["num_experts_per_tok"] = 300; },
       ErrorKind::kInvalidArgument, {"num_experts_per_tok"}},
      {"experts_per_tok beyond kept groups",
       [](json& j) {
         j["topk_group"] = 1;
         j["num_experts_per_tok"] = 40;
       },
       ErrorKind::kInvalidArgument, {"num_experts_per_tok", "topk_group"}},
      {"first_k_dense_replace > layers", [](json& j) { j["first_k_dense_replace"] = 62; },
       ErrorKind::kInvalidArgument, {"first_k_dense_replace"}},
      {"kv heads differ", [](json& j) { j["num_key_value_heads"] = 8; },
       ErrorKind::kInvalidArgument, {"num_key_value_heads"}},
      {"odd rope dim", [](json& j) { j["qk_rope_head_dim"] = 63; }, ErrorKind::kInvalidArgument,
       {"qk_rope_head_dim"}},
      {"null q_lora_rank", [](json& j) { j["q_lora_rank"] = nullptr; }, ErrorKind::kUnsupported,
       {"q_lora_rank"}},
      {"softmax scoring", [](json& j) { j["scoring_func"] = "softmax"; }, ErrorKind::kUnsupported,
       {"scoring_func"}},
      {"greedy topk", [](json& j) { j["topk_method"] = "greedy"; }, ErrorKind::kUnsupported,
       {"topk_method"}},
      {"eos beyond vocab", [](json& j) { j["eos_token_id"] = 129280; },
       ErrorKind::kInvalidArgument, {"eos_token_id"}},
      {"tied embeddings", [](json& j) { j["tie_word_embeddings"] = true; },
       ErrorKind::kUnsupported, {"tie_word_embeddings"}},
      {"zero scaling factor", [](json& j) { j["routed_scaling_factor"] = 0.0; },
       ErrorKind::kInvalidArgument, {"routed_scaling_factor"}},
      {"int8 quantization", [](json& j) { j["quantization_config"]["quant_method"] = "bitsandbytes"; },
       ErrorKind::kUnsupported, {"quantization_config.quant_method", "bitsandbytes"}},
      {"e5m2", [](json& j) { j["quantization_config"]["fmt"] = "e5m2"; }, ErrorKind::kUnsupported,
       {"quantization_config.fmt"}},
      {"64x64 blocks", [](json& j) { j["quantization_config"]["weight_block_size"] = {64, 64}; },
       ErrorKind::kUnsupported, {"weight_block_size"}},
      {"block size not a pair", [](json& j) { j["quantization_config"]["weight_block_size"] = 128; },
       ErrorKind::kInvalidArgument, {"weight_block_size"}},
      {"static activations", [](json& j) { j["quantization_config"]["activation_scheme"] = "static"; },
       ErrorKind::kUnsupported, {"activation_scheme"}},
      {"linear rope", [](json& j) { j["rope_scaling"]["type"] = "linear"; }, ErrorKind::kUnsupported,
       {"rope_scaling.type", "linear"}},
      {"yarn without factor", [](json& j) { j["rope_scaling"].erase("factor"); },
       ErrorKind::kInvalidArgument, {"rope_scaling.factor"}},
      {"yarn factor below 1", [](json& j) { j["rope_scaling"]["factor"] = 0.5; },
       ErrorKind::kInvalidArgument, {"rope_scaling.factor"}},
      {"beta_fast < beta_slow", [](json& j) { j["rope_scaling"]["beta_fast"] = 0.5; },
       ErrorKind::kInvalidArgument, {"beta_fast"}},
      {"rope_scaling a string", [](json& j) { j["rope_scaling"] = "yarn"; },
       ErrorKind::kInvalidArgument, {"rope_scaling"}},
  };
  for (const BadCase& bc : cases) {
    SCOPED_TRACE(bc.what);
    json j = json::parse(kDeepSeekV3);
    bc.mutate(j);
    bool thrown = false;
    try {
      ModelConfig::from_json(j, "my/config.json");
    } catch (const Error& e) {
      thrown = true;
      EXPECT_EQ(e.kind(), bc.kind) << e.what();
      EXPECT_NE(e.message().find("my/config.json"), std::string::npos) << e.message();
      for (const std::string& n : bc.needles) {
        EXPECT_NE(e.message().find(n), std::string::npos) << n << " not in: " << e.message();
      }
    }
    EXPECT_TRUE(thrown);
  }
}

TEST(ModelConfig, Load) {
  test::TempDir dir;
  test::write_bytes(dir / "config.json", kKimiK2);
  EXPECT_EQ(ModelConfig::load(dir / "config.json").n_routed_experts, 384);
  expect_error([&] { ModelConfig::load(dir / "missing.json"); }, ErrorKind::kNotFound,
               {"missing.json"});
  test::write_bytes(dir / "bad.json", "{\"hidden_size\": ");
  expect_error([&] { ModelConfig::load(dir / "bad.json"); }, ErrorKind::kInvalidArgument,
               {"bad.json", "JSON"});
  test::write_bytes(dir / "array.json", "[1, 2]");
  expect_error([&] { ModelConfig::load(dir / "array.json"); }, ErrorKind::kInvalidArgument,
               {"array.json", "object"});
}

TEST(ModelConfig, ValidateCatchesHandEditedConfigs) {
  ModelConfig c = preset_config("tiny");
  c.n_group = 3;
  expect_error([&] { c.validate(); }, ErrorKind::kInvalidArgument, {"n_group"});
}

}  // namespace
}  // namespace hymoe
