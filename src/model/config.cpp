// config.json parsing and validation for DeepseekV3ForCausalLM checkpoints.
#include "hymoe/model/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"

namespace hymoe {
namespace {

using nlohmann::json;

// Typed field readers: every failure names the source and the field.
class Fields {
 public:
  Fields(const json& j, std::string_view source, std::string prefix = "")
      : j_(j), source_(source), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) return require(key, fallback);
    const json& v = j_.at(key);
    if (!v.is_number_integer()) type_error(key, "an integer", v);
    return v.get<int64_t>();
  }
  double number(const char* key, std::optional<double> fallback = std::nullopt) const {
    if (!has(key)) return require(key, fallback);
    const json& v = j_.at(key);
    if (!v.is_number()) type_error(key, "a number", v);
    return v.get<double>();
  }
  bool boolean(const char* key, std::optional<bool> fallback = std::nullopt) const {
    if (!has(key)) return require(key, fallback);
    const json& v = j_.at(key);
    if (!v.is_boolean()) type_error(key, "true or false", v);
    return v.get<bool>();
  }
  std::string string(const char* key, std::optional<std::string> fallback = std::nullopt) const {
    if (!has(key)) return require(key, std::move(fallback));
    const json& v = j_.at(key);
    if (!v.is_string()) type_error(key, "a string", v);
    return v.get<std::string>();
  }
  // An integer, or an array of integers whose first element is taken (eos_token_id may be a list).
  int64_t first_integer(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (v.is_array() && !v.empty() && v.front().is_number_integer()) return v.front().get<int64_t>();
    if (!v.is_number_integer()) type_error(key, "an integer or a list of integers", v);
    return v.get<int64_t>();
  }

  std::string name(const char* key) const { return prefix_ + key; }

  [[noreturn]] void type_error(const char* key, const char* want, const json& got) const {
    HYMOE_THROW(kInvalidArgument, "{}: field '{}' must be {}, got {} ({})", source_, name(key), want,
                got.dump(), got.type_name());
  }

 private:
  template <typename T>
  T require(const char* key, std::optional<T> fallback) const {
    if (!fallback) HYMOE_THROW(kInvalidArgument, "{}: missing required field '{}'", source_, name(key));
    return *fallback;
  }

  const json& j_;
  std::string_view source_;
  std::string prefix_;
};

void check_positive(std::string_view source, const char* field, int64_t v) {
  HYMOE_CHECK(v > 0, kInvalidArgument, "{}: field '{}' must be positive, got {}", source, field, v);
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, std::string_view source) {
  HYMOE_CHECK(j.is_object(), kInvalidArgument, "{}: expected a JSON object, got {}", source,
              j.type_name());
  Fields f(j, source);
  ModelConfig c;  // optional fields default to HF DeepseekV3Config's defaults (V3 values)

  HYMOE_CHECK(f.has("architectures"), kInvalidArgument, "{}: missing required field 'architectures'",
              source);
  const json& arch = j.at("architectures");
  if (!arch.is_array() || arch.size() != 1 || !arch.front().is_string()) {
    f.type_error("architectures", "a list of one string", arch);
  }
  c.architecture = arch.front().get<std::string>();
  c.model_type = f.string("model_type");

  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.moe_intermediate_size = f.integer("moe_intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_nextn_predict_layers = f.integer("num_nextn_predict_layers", c.num_nextn_predict_layers);
  c.num_attention_heads = f.integer("num_attention_heads");
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  c.n_shared_experts = f.integer("n_shared_experts", c.n_shared_experts);
  c.n_routed_experts = f.integer("n_routed_experts");
  c.num_experts_per_tok = f.integer("num_experts_per_tok");
  c.n_group = f.integer("n_group", c.n_group);
  c.topk_group = f.integer("topk_group", c.topk_group);
  c.first_k_dense_replace = f.integer("first_k_dense_replace", c.first_k_dense_replace);
  c.moe_layer_freq = f.integer("moe_layer_freq", c.moe_layer_freq);
  c.routed_scaling_factor = f.number("routed_scaling_factor", c.routed_scaling_factor);
  c.norm_topk_prob = f.boolean("norm_topk_prob", c.norm_topk_prob);
  c.scoring_func = f.string("scoring_func", std::string("sigmoid"));
  c.topk_method = f.string("topk_method", std::string("noaux_tc"));
  if (j.contains("q_lora_rank") && j.at("q_lora_rank").is_null()) {
    HYMOE_THROW(kUnsupported, "{}: field 'q_lora_rank' is null (attention without a query LoRA, "
                "DeepSeek-V2-Lite style) is not supported", source);
  }
  c.q_lora_rank = f.integer("q_lora_rank");
  c.kv_lora_rank = f.integer("kv_lora_rank");
  c.qk_nope_head_dim = f.integer("qk_nope_head_dim");
  c.qk_rope_head_dim = f.integer("qk_rope_head_dim");
  c.v_head_dim = f.integer("v_head_dim");
  c.max_position_embeddings = f.integer("max_position_embeddings", c.max_position_embeddings);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.bos_token_id = f.first_integer("bos_token_id", 0);
  c.eos_token_id = f.first_integer("eos_token_id", 1);

  c.rope_scaling.reset();
  if (f.has("rope_scaling")) {
    const json& rs = j.at("rope_scaling");
    if (!rs.is_object()) f.type_error("rope_scaling", "an object or null", rs);
    Fields r(rs, source, "rope_scaling.");
    std::string type = r.has("type") ? r.string("type") : r.string("rope_type");
    HYMOE_CHECK(type == "yarn", kUnsupported,
                "{}: field 'rope_scaling.type' is '{}'; only 'yarn' is supported", source, type);
    YarnScaling y;
    y.factor = r.number("factor");
    y.original_max_position_embeddings = r.integer("original_max_position_embeddings");
    y.beta_fast = r.number("beta_fast", 32.0);
    y.beta_slow = r.number("beta_slow", 1.0);
    y.mscale = r.number("mscale", 1.0);
    y.mscale_all_dim = r.number("mscale_all_dim", 0.0);
    c.rope_scaling = y;
  }

  c.quantization.reset();
  if (f.has("quantization_config")) {
    const json& q = j.at("quantization_config");
    if (!q.is_object()) f.type_error("quantization_config", "an object", q);
    Fields qf(q, source, "quantization_config.");
    std::string method = qf.string("quant_method");
    HYMOE_CHECK(method == "fp8", kUnsupported,
                "{}: field 'quantization_config.quant_method' is '{}'; only 'fp8' is supported",
                source, method);
    Fp8Quantization fp8;
    fp8.fmt = qf.string("fmt", std::string("e4m3"));
    HYMOE_CHECK(qf.has("weight_block_size"), kInvalidArgument,
                "{}: missing required field 'quantization_config.weight_block_size'", source);
    const json& bs = q.at("weight_block_size");
    if (!bs.is_array() || bs.size() != 2 || !bs[0].is_number_integer() ||
        !bs[1].is_number_integer()) {
      qf.type_error("weight_block_size", "a list of two integers", bs);
    }
    fp8.block_n = bs[0].get<int64_t>();
    fp8.block_k = bs[1].get<int64_t>();
    if (qf.has("activation_scheme")) {
      std::string act = qf.string("activation_scheme");
      HYMOE_CHECK(act == "dynamic", kUnsupported,
                  "{}: field 'quantization_config.activation_scheme' is '{}'; only 'dynamic' is "
                  "supported", source, act);
    }
    c.quantization = fp8;
  }

  c.validate(source);
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& config_json) {
  std::ifstream in(config_json);
  HYMOE_CHECK(in.good(), kNotFound, "{}: cannot open", config_json.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    HYMOE_THROW(kInvalidArgument, "{}: not valid JSON: {}", config_json.string(), e.what());
  }
  return from_json(j, config_json.string());
}

void ModelConfig::validate(std::string_view source) const {
  HYMOE_CHECK(architecture == "DeepseekV3ForCausalLM", kUnsupported,
              "{}: field 'architectures' is '{}'; only DeepseekV3ForCausalLM is supported", source,
              architecture);
  HYMOE_CHECK(model_type == "deepseek_v3" || model_type == "kimi_k2", kUnsupported,
              "{}: field 'model_type' is '{}'; expected 'deepseek_v3' or 'kimi_k2'", source,
              model_type);
  check_positive(source, "vocab_size", vocab_size);
  check_positive(source, "hidden_size", hidden_size);
  check_positive(source, "num_hidden_layers", num_hidden_layers);
  check_positive(source, "num_attention_heads", num_attention_heads);
  check_positive(source, "q_lora_rank", q_lora_rank);
  check_positive(source, "kv_lora_rank", kv_lora_rank);
  check_positive(source, "qk_nope_head_dim", qk_nope_head_dim);
  check_positive(source, "qk_rope_head_dim", qk_rope_head_dim);
  check_positive(source, "v_head_dim", v_head_dim);
  check_positive(source, "max_position_embeddings", max_position_embeddings);
  check_positive(source, "moe_layer_freq", moe_layer_freq);
  HYMOE_CHECK(qk_rope_head_dim % 2 == 0, kInvalidArgument,
              "{}: field 'qk_rope_head_dim' ({}) must be even (RoPE rotates pairs)", source,
              qk_rope_head_dim);
  HYMOE_CHECK(num_key_value_heads == num_attention_heads, kInvalidArgument,
              "{}: field 'num_key_value_heads' ({}) must equal num_attention_heads ({}) for MLA",
              source, num_key_value_heads, num_attention_heads);
  HYMOE_CHECK(num_nextn_predict_layers >= 0, kInvalidArgument,
              "{}: field 'num_nextn_predict_layers' must be >= 0, got {}", source,
              num_nextn_predict_layers);
  HYMOE_CHECK(first_k_dense_replace >= 0 && first_k_dense_replace <= num_hidden_layers,
              kInvalidArgument, "{}: field 'first_k_dense_replace' ({}) must be in [0, {}]", source,
              first_k_dense_replace, num_hidden_layers);
  HYMOE_CHECK(n_routed_experts >= 0, kInvalidArgument,
              "{}: field 'n_routed_experts' must be >= 0, got {}", source, n_routed_experts);
  bool any_dense = false;
  for (int64_t l = 0; l < num_hidden_layers; ++l) any_dense |= !is_moe_layer(l);
  if (any_dense) check_positive(source, "intermediate_size", intermediate_size);
  if (n_routed_experts > 0) {
    check_positive(source, "moe_intermediate_size", moe_intermediate_size);
    HYMOE_CHECK(n_shared_experts >= 0, kInvalidArgument,
                "{}: field 'n_shared_experts' must be >= 0, got {}", source, n_shared_experts);
    HYMOE_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= n_routed_experts,
                kInvalidArgument, "{}: field 'num_experts_per_tok' ({}) must be in [1, "
                "n_routed_experts = {}]", source, num_experts_per_tok, n_routed_experts);
    HYMOE_CHECK(n_group >= 1 && n_routed_experts % n_group == 0, kInvalidArgument,
                "{}: field 'n_group' ({}) must be >= 1 and divide n_routed_experts ({})", source,
                n_group, n_routed_experts);
    HYMOE_CHECK(topk_group >= 1 && topk_group <= n_group, kInvalidArgument,
                "{}: field 'topk_group' ({}) must be in [1, n_group = {}]", source, topk_group,
                n_group);
    const int64_t per_group = n_routed_experts / n_group;
    HYMOE_CHECK(n_group == 1 || per_group >= 2, kInvalidArgument,
                "{}: field 'n_group' ({}) leaves {} expert(s) per group; group scores need >= 2",
                source, n_group, per_group);
    HYMOE_CHECK(num_experts_per_tok <= topk_group * per_group, kInvalidArgument,
                "{}: field 'num_experts_per_tok' ({}) exceeds the experts in topk_group ({}) groups "
                "of {}", source, num_experts_per_tok, topk_group, per_group);
    HYMOE_CHECK(routed_scaling_factor > 0 && std::isfinite(routed_scaling_factor),
                kInvalidArgument, "{}: field 'routed_scaling_factor' must be positive, got {}",
                source, routed_scaling_factor);
    HYMOE_CHECK(scoring_func == "sigmoid", kUnsupported,
                "{}: field 'scoring_func' is '{}'; only 'sigmoid' is supported", source,
                scoring_func);
    HYMOE_CHECK(topk_method == "noaux_tc", kUnsupported,
                "{}: field 'topk_method' is '{}'; only 'noaux_tc' is supported", source,
                topk_method);
  }
  HYMOE_CHECK(rms_norm_eps > 0 && std::isfinite(rms_norm_eps), kInvalidArgument,
              "{}: field 'rms_norm_eps' must be positive, got {}", source, rms_norm_eps);
  HYMOE_CHECK(rope_theta > 0 && std::isfinite(rope_theta), kInvalidArgument,
              "{}: field 'rope_theta' must be positive, got {}", source, rope_theta);
  HYMOE_CHECK(!tie_word_embeddings, kUnsupported,
              "{}: field 'tie_word_embeddings' is true; the architecture has an untied lm_head",
              source);
  HYMOE_CHECK(bos_token_id >= 0 && bos_token_id < vocab_size, kInvalidArgument,
              "{}: field 'bos_token_id' ({}) must be in [0, vocab_size = {})", source, bos_token_id,
              vocab_size);
  HYMOE_CHECK(eos_token_id >= 0 && eos_token_id < vocab_size, kInvalidArgument,
              "{}: field 'eos_token_id' ({}) must be in [0, vocab_size = {})", source, eos_token_id,
              vocab_size);
  if (rope_scaling) {
    const YarnScaling& y = *rope_scaling;
    HYMOE_CHECK(y.factor >= 1.0 && std::isfinite(y.factor), kInvalidArgument,
                "{}: field 'rope_scaling.factor' must be >= 1, got {}", source, y.factor);
    HYMOE_CHECK(y.original_max_position_embeddings > 0, kInvalidArgument,
                "{}: field 'rope_scaling.original_max_position_embeddings' must be positive, got {}",
                source, y.original_max_position_embeddings);
    HYMOE_CHECK(y.beta_fast > 0 && y.beta_slow > 0 && y.beta_fast >= y.beta_slow, kInvalidArgument,
                "{}: fields 'rope_scaling.beta_fast' ({}) and 'beta_slow' ({}) must be positive "
                "with beta_fast >= beta_slow", source, y.beta_fast, y.beta_slow);
    HYMOE_CHECK(std::isfinite(y.mscale) && std::isfinite(y.mscale_all_dim), kInvalidArgument,
                "{}: fields 'rope_scaling.mscale' and 'mscale_all_dim' must be finite", source);
  }
  if (quantization) {
    HYMOE_CHECK(quantization->fmt == "e4m3", kUnsupported,
                "{}: field 'quantization_config.fmt' is '{}'; only 'e4m3' is supported", source,
                quantization->fmt);
    HYMOE_CHECK(quantization->block_n == 128 && quantization->block_k == 128, kUnsupported,
                "{}: field 'quantization_config.weight_block_size' is [{}, {}]; only [128, 128] is "
                "supported", source, quantization->block_n, quantization->block_k);
  }
}

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  // HF DeepseekV3Attention / DeepSeek's reference: YaRN's attention temperature on the softmax.
  if (rope_scaling && rope_scaling->mscale_all_dim != 0.0 && rope_scaling->factor > 1.0) {
    const double m = 0.1 * rope_scaling->mscale_all_dim * std::log(rope_scaling->factor) + 1.0;
    scale *= m * m;
  }
  return scale;
}

json ModelConfig::to_json() const {
  json j = {
      {"architectures", json::array({architecture})},
      {"model_type", model_type},
      {"torch_dtype", "bfloat16"},
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"moe_intermediate_size", moe_intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_nextn_predict_layers", num_nextn_predict_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"n_shared_experts", n_shared_experts},
      {"n_routed_experts", n_routed_experts},
      {"num_experts_per_tok", num_experts_per_tok},
      {"n_group", n_group},
      {"topk_group", topk_group},
      {"first_k_dense_replace", first_k_dense_replace},
      {"moe_layer_freq", moe_layer_freq},
      {"routed_scaling_factor", routed_scaling_factor},
      {"norm_topk_prob", norm_topk_prob},
      {"scoring_func", scoring_func},
      {"topk_method", topk_method},
      {"ep_size", 1},
      {"q_lora_rank", q_lora_rank},
      {"kv_lora_rank", kv_lora_rank},
      {"qk_nope_head_dim", qk_nope_head_dim},
      {"qk_rope_head_dim", qk_rope_head_dim},
      {"v_head_dim", v_head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", max_position_embeddings},
      {"rms_norm_eps", rms_norm_eps},
      {"rope_theta", rope_theta},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"initializer_range", 0.02},
      {"use_cache", true},
      {"tie_word_embeddings", tie_word_embeddings},
      {"bos_token_id", bos_token_id},
      {"eos_token_id", eos_token_id},
  };
  if (rope_scaling) {
    const YarnScaling& y = *rope_scaling;
    j["rope_scaling"] = {{"type", "yarn"},
                         {"factor", y.factor},
                         {"original_max_position_embeddings", y.original_max_position_embeddings},
                         {"beta_fast", y.beta_fast},
                         {"beta_slow", y.beta_slow},
                         {"mscale", y.mscale},
                         {"mscale_all_dim", y.mscale_all_dim}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (quantization) {
    j["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", quantization->fmt},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {quantization->block_n, quantization->block_k}}};
  }
  return j;
}

}  // namespace hymoe
