// Per-layer data every executor prepares once at construction from the checkpoint's views:
// norms and biases as FP32, and kv_b split into the absorbed attention's W_UK and W_UV (BF16).
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/model/model_weights.h"

namespace hymoe {

// A dense tensor's values as FP32, row-major. Throws kUnsupported for a dtype other than
// BF16, F16, F32.
std::vector<float> dense_to_float(const DenseMatrix& m);
// Row `row` of a dense matrix as FP32 into out[0, cols).
void dense_row_to_float(const DenseMatrix& m, int64_t row, float* out);

// kv_b's rows per head are qk_nope rows of W_UK then v_head rows of W_UV, each kv_lora wide.
struct AbsorbedKvB {
  std::vector<uint16_t> w_uk;    // [heads][qk_nope][kv_lora] BF16
  std::vector<uint16_t> w_uv_t;  // [heads][kv_lora][v_head] BF16 (W_UV transposed)
};
AbsorbedKvB split_kv_b(const Fp8Matrix& kv_b, const ModelConfig& config);

// A layer's prepared data.
struct PreparedLayer {
  std::vector<float> input_norm, post_attn_norm, q_a_norm, kv_a_norm;
  AbsorbedKvB kv_b;
  std::vector<float> router_bias;  // MoE layers
};
PreparedLayer prepare_layer(const LayerWeights& w, const ModelConfig& config);

}  // namespace hymoe
