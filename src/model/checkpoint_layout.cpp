#include "hymoe/model/checkpoint_layout.h"

#include <charconv>

#include <fmt/format.h>

#include "hymoe/common/error.h"

namespace hymoe {
namespace {

int64_t blocks(int64_t n) { return (n + 127) / 128; }

class GroupBuilder {
 public:
  GroupBuilder(LayoutGroup& g, int64_t layer) : g_(g), layer_(layer) {}

  void fp8(const std::string& prefix, int64_t out, int64_t in, int64_t expert = -1) {
    g_.tensors.push_back({{prefix + ".weight", DType::kF8E4M3, {out, in}},
                          TensorRole::kFp8Weight, layer_, expert});
    g_.tensors.push_back({{prefix + ".weight_scale_inv", DType::kF32, {blocks(out), blocks(in)}},
                          TensorRole::kFp8Scale, layer_, expert});
  }
  void mlp(const std::string& prefix, int64_t hidden, int64_t inter, int64_t expert = -1) {
    fp8(prefix + ".gate_proj", inter, hidden, expert);
    fp8(prefix + ".up_proj", inter, hidden, expert);
    fp8(prefix + ".down_proj", hidden, inter, expert);
  }
  void dense(const std::string& name, DType dtype, std::vector<int64_t> shape, TensorRole role) {
    g_.tensors.push_back({{name, dtype, std::move(shape)}, role, layer_, -1});
  }

 private:
  LayoutGroup& g_;
  int64_t layer_;
};

}  // namespace

std::vector<LayoutGroup> checkpoint_layout(const ModelConfig& c) {
  HYMOE_CHECK(c.quantization.has_value(), kUnsupported,
              "checkpoint layout: the config has no FP8 quantization_config");
  const int64_t H = c.hidden_size;
  std::vector<LayoutGroup> groups;

  groups.push_back({"embed", {}});
  GroupBuilder(groups.back(), -1)
      .dense("model.embed_tokens.weight", DType::kBF16, {c.vocab_size, H}, TensorRole::kEmbedding);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    groups.push_back({fmt::format("layer.{}", l), {}});
    GroupBuilder b(groups.back(), l);
    const std::string p = fmt::format("model.layers.{}", l);
    b.dense(p + ".input_layernorm.weight", DType::kBF16, {H}, TensorRole::kNorm);
    b.dense(p + ".post_attention_layernorm.weight", DType::kBF16, {H}, TensorRole::kNorm);
    const std::string a = p + ".self_attn";
    b.fp8(a + ".q_a_proj", c.q_lora_rank, H);
    b.dense(a + ".q_a_layernorm.weight", DType::kBF16, {c.q_lora_rank}, TensorRole::kNorm);
    b.fp8(a + ".q_b_proj", c.num_attention_heads * c.qk_head_dim(), c.q_lora_rank);
    b.fp8(a + ".kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, H);
    b.dense(a + ".kv_a_layernorm.weight", DType::kBF16, {c.kv_lora_rank}, TensorRole::kNorm);
    b.fp8(a + ".kv_b_proj", c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim),
          c.kv_lora_rank);
    b.fp8(a + ".o_proj", H, c.num_attention_heads * c.v_head_dim);
    const std::string m = p + ".mlp";
    if (!c.is_moe_layer(l)) {
      b.mlp(m, H, c.intermediate_size);
      continue;
    }
    b.dense(m + ".gate.weight", DType::kBF16, {c.n_routed_experts, H}, TensorRole::kRouter);
    b.dense(m + ".gate.e_score_correction_bias", DType::kF32, {c.n_routed_experts},
            TensorRole::kRouterBias);
    if (c.n_shared_experts > 0) {
      b.mlp(m + ".shared_experts", H, c.n_shared_experts * c.moe_intermediate_size);
    }
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      b.mlp(fmt::format("{}.experts.{}", m, e), H, c.moe_intermediate_size, e);
    }
  }

  groups.push_back({"head", {}});
  GroupBuilder h(groups.back(), -1);
  h.dense("model.norm.weight", DType::kBF16, {H}, TensorRole::kNorm);
  h.dense("lm_head.weight", DType::kBF16, {c.vocab_size, H}, TensorRole::kLmHead);
  return groups;
}

ExpertId parse_expert_name(std::string_view name) {
  constexpr std::string_view kLayers = "model.layers.";
  constexpr std::string_view kExperts = ".mlp.experts.";
  if (!name.starts_with(kLayers)) return {};
  auto number = [](std::string_view s, size_t& pos, int64_t& out) {
    const char* begin = s.data() + pos;
    auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), out);
    if (ec != std::errc() || ptr == begin) return false;
    pos += static_cast<size_t>(ptr - begin);
    return true;
  };
  size_t pos = kLayers.size();
  ExpertId id;
  if (!number(name, pos, id.layer)) return {};
  if (name.substr(pos, kExperts.size()) != kExperts) return {};
  pos += kExperts.size();
  if (!number(name, pos, id.expert) || pos >= name.size() || name[pos] != '.') return {};
  return id;
}

}  // namespace hymoe
