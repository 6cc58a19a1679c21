// Typed views over a WeightStore, per layer: what the engines and the reference compute with.
// Nothing is copied; every pointer points into the store, which must outlive these views.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hymoe/kernels/fp8_matrix.h"
#include "hymoe/model/config.h"
#include "hymoe/model/dtype.h"

namespace hymoe {

class WeightStore;

// A linear layer's weight in the checkpoint's FP8 form: the CPU kernels' view type
// (hymoe/kernels/fp8_matrix.h), W[i][j] = fp8(data[i*cols + j]) * scale_inv[(i/128) *
// scale_cols() + j/128], shape [rows=out, cols=in], row-major. `specials` is set by
// Fp8SpecialIndex (engine) where the CPU GEMV decodes by shifts.
using Fp8Matrix = kernels::Fp8MatrixView;

// A dense (not quantised) tensor of 1 or 2 dims: embeddings, lm_head, router, norms, biases.
// dtype is BF16, F16 or F32; a vector has rows == 1.
struct DenseMatrix {
  DType dtype = DType::kBF16;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  float at(int64_t row, int64_t col) const;  // element as float (slow path, for references)
};

struct MlpWeights {  // SiLU-gated: down(silu(gate x) * up x)
  Fp8Matrix gate;    // [inter, hidden]
  Fp8Matrix up;      // [inter, hidden]
  Fp8Matrix down;    // [hidden, inter]
};

struct AttentionWeights {  // MLA
  Fp8Matrix q_a;            // [q_lora_rank, hidden]
  DenseMatrix q_a_norm;     // [q_lora_rank]
  Fp8Matrix q_b;            // [heads * (qk_nope + qk_rope), q_lora_rank]
  Fp8Matrix kv_a_with_mqa;  // [kv_lora_rank + qk_rope, hidden]
  DenseMatrix kv_a_norm;    // [kv_lora_rank]
  Fp8Matrix kv_b;           // [heads * (qk_nope + v_head), kv_lora_rank]
  Fp8Matrix o;              // [hidden, heads * v_head]
};

struct MoeWeights {
  DenseMatrix router;       // gate.weight [n_routed_experts, hidden]
  DenseMatrix router_bias;  // e_score_correction_bias [n_routed_experts] (F32)
  std::optional<MlpWeights> shared;  // n_shared_experts merged into one MLP of width n*moe_inter
  std::vector<MlpWeights> experts;   // [n_routed_experts]
};

struct LayerWeights {
  DenseMatrix input_norm;       // input_layernorm [hidden]
  DenseMatrix post_attn_norm;   // post_attention_layernorm [hidden]
  AttentionWeights attn;
  std::optional<MlpWeights> dense;  // first_k_dense_replace layers
  std::optional<MoeWeights> moe;    // the others
};

struct ModelWeights {
  const ModelConfig* config = nullptr;
  DenseMatrix embed;       // model.embed_tokens.weight [vocab, hidden]
  std::vector<LayerWeights> layers;  // num_hidden_layers (MTP layers are not bound)
  DenseMatrix final_norm;  // model.norm.weight [hidden]
  DenseMatrix lm_head;     // lm_head.weight [vocab, hidden]

  // Binds every view by checkpoint name, checking dtype and shape against the config; throws
  // hymoe::Error naming the tensor on any mismatch or absence.
  static ModelWeights bind(const WeightStore& store);
};

}  // namespace hymoe
