// ModelWeights::bind: typed views over a WeightStore, every tensor checked against the config.
#include "hymoe/model/model_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/model/weight_store.h"

namespace hymoe {

float DenseMatrix::at(int64_t row, int64_t col) const {
  const int64_t i = row * cols + col;
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return f16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::kF32: return static_cast<const float*>(data)[i];
    default: break;
  }
  HYMOE_THROW(kInternal, "DenseMatrix::at on a {} tensor", dtype_name(dtype));
}

namespace {

class Binder {
 public:
  explicit Binder(const WeightStore& store) : store_(store) {}

  const TensorView& get(const std::string& name, std::initializer_list<DType> dtypes,
                        std::vector<int64_t> shape) const {
    const TensorView* t = store_.find(name);
    HYMOE_CHECK(t != nullptr, kNotFound, "tensor '{}' is missing from the checkpoint", name);
    bool dtype_ok = false;
    for (DType d : dtypes) dtype_ok |= t->dtype == d;
    if (!dtype_ok) {
      std::vector<std::string_view> want;
      for (DType d : dtypes) want.push_back(dtype_name(d));
      HYMOE_THROW(kCorruptData, "tensor '{}' is {}, expected {}", name, dtype_name(t->dtype),
                  fmt::join(want, " or "));
    }
    HYMOE_CHECK(t->shape == shape, kCorruptData, "tensor '{}' has shape [{}], the config needs [{}]",
                name, fmt::join(t->shape, ", "), fmt::join(shape, ", "));
    HYMOE_CHECK(t->nbytes == static_cast<size_t>(t->numel()) * dtype_size(t->dtype), kInternal,
                "tensor '{}': byte size does not match its shape", name);
    return *t;
  }

  Fp8Matrix fp8(const std::string& prefix, int64_t rows, int64_t cols) const {
    const TensorView& w = get(prefix + ".weight", {DType::kF8E4M3}, {rows, cols});
    const int64_t sr = (rows + Fp8Matrix::kBlock - 1) / Fp8Matrix::kBlock;
    const int64_t sc = (cols + Fp8Matrix::kBlock - 1) / Fp8Matrix::kBlock;
    const TensorView& s = get(prefix + ".weight_scale_inv", {DType::kF32}, {sr, sc});
    return Fp8Matrix{w.as<uint8_t>(), s.as<float>(), rows, cols};
  }

  DenseMatrix vector(const std::string& name, int64_t n,
                     std::initializer_list<DType> dtypes = {DType::kBF16, DType::kF16, DType::kF32}) const {
    const TensorView& t = get(name, dtypes, {n});
    return DenseMatrix{t.dtype, t.data, 1, n};
  }

  DenseMatrix matrix(const std::string& name, int64_t rows, int64_t cols) const {
    const TensorView& t = get(name, {DType::kBF16, DType::kF16, DType::kF32}, {rows, cols});
    return DenseMatrix{t.dtype, t.data, rows, cols};
  }

  MlpWeights mlp(const std::string& prefix, int64_t hidden, int64_t inter) const {
    return MlpWeights{fp8(prefix + ".gate_proj", inter, hidden), fp8(prefix + ".up_proj", inter, hidden),
                      fp8(prefix + ".down_proj", hidden, inter)};
  }

 private:
  const WeightStore& store_;
};

}  // namespace

ModelWeights ModelWeights::bind(const WeightStore& store) {
  const ModelConfig& c = store.config();
  HYMOE_CHECK(c.quantization.has_value(), kUnsupported,
              "the checkpoint has no FP8 quantization_config; only FP8 checkpoints are supported");
  const Binder b(store);
  const int64_t H = c.hidden_size;
  ModelWeights w;
  w.config = &c;
  w.embed = b.matrix("model.embed_tokens.weight", c.vocab_size, H);
  w.final_norm = b.vector("model.norm.weight", H);
  w.lm_head = b.matrix("lm_head.weight", c.vocab_size, H);
  w.layers.reserve(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}", l);
    LayerWeights lw;
    lw.input_norm = b.vector(p + ".input_layernorm.weight", H);
    lw.post_attn_norm = b.vector(p + ".post_attention_layernorm.weight", H);
    const std::string a = p + ".self_attn";
    lw.attn.q_a = b.fp8(a + ".q_a_proj", c.q_lora_rank, H);
    lw.attn.q_a_norm = b.vector(a + ".q_a_layernorm.weight", c.q_lora_rank);
    lw.attn.q_b = b.fp8(a + ".q_b_proj", c.num_attention_heads * c.qk_head_dim(), c.q_lora_rank);
    lw.attn.kv_a_with_mqa = b.fp8(a + ".kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, H);
    lw.attn.kv_a_norm = b.vector(a + ".kv_a_layernorm.weight", c.kv_lora_rank);
    lw.attn.kv_b = b.fp8(a + ".kv_b_proj", c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim),
                         c.kv_lora_rank);
    lw.attn.o = b.fp8(a + ".o_proj", H, c.num_attention_heads * c.v_head_dim);
    const std::string m = p + ".mlp";
    if (!c.is_moe_layer(l)) {
      lw.dense = b.mlp(m, H, c.intermediate_size);
    } else {
      MoeWeights moe;
      moe.router = b.matrix(m + ".gate.weight", c.n_routed_experts, H);
      moe.router_bias = b.vector(m + ".gate.e_score_correction_bias", c.n_routed_experts, {DType::kF32});
      if (c.n_shared_experts > 0) {
        moe.shared = b.mlp(m + ".shared_experts", H, c.n_shared_experts * c.moe_intermediate_size);
      }
      moe.experts.reserve(static_cast<size_t>(c.n_routed_experts));
      for (int64_t e = 0; e < c.n_routed_experts; ++e) {
        moe.experts.push_back(b.mlp(fmt::format("{}.experts.{}", m, e), H, c.moe_intermediate_size));
      }
      lw.moe = std::move(moe);
    }
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace hymoe
