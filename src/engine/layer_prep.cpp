#include "hymoe/engine/layer_prep.h"

#include <algorithm>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"

namespace hymoe {

void dense_row_to_float(const DenseMatrix& m, int64_t row, float* out) {
  switch (m.dtype) {
    case DType::kBF16: {
      const auto* p = static_cast<const uint16_t*>(m.data) + row * m.cols;
      for (int64_t j = 0; j < m.cols; ++j) out[j] = bf16_to_float(p[j]);
      return;
    }
    case DType::kF16: {
      const auto* p = static_cast<const uint16_t*>(m.data) + row * m.cols;
      for (int64_t j = 0; j < m.cols; ++j) out[j] = f16_to_float(p[j]);
      return;
    }
    case DType::kF32: {
      const auto* p = static_cast<const float*>(m.data) + row * m.cols;
      std::copy(p, p + m.cols, out);
      return;
    }
    default:
      HYMOE_THROW(kUnsupported, "dtype {} is not supported for a dense tensor", dtype_name(m.dtype));
  }
}

std::vector<float> dense_to_float(const DenseMatrix& m) {
  std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) dense_row_to_float(m, r, v.data() + r * m.cols);
  return v;
}

AbsorbedKvB split_kv_b(const Fp8Matrix& kvb, const ModelConfig& c) {
  const int64_t heads = c.num_attention_heads, nope = c.qk_nope_head_dim, vd = c.v_head_dim, lora = c.kv_lora_rank;
  AbsorbedKvB out;
  out.w_uk.resize(static_cast<size_t>(heads * nope * lora));
  out.w_uv_t.resize(static_cast<size_t>(heads * vd * lora));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t r = 0; r < nope + vd; ++r) {
      const int64_t row = h * (nope + vd) + r;
      for (int64_t col = 0; col < lora; ++col) {
        const uint16_t v = float_to_bf16(fp8_e4m3_to_float(kvb.data[row * kvb.cols + col]) * kvb.scale(row, col));
        if (r < nope) {
          out.w_uk[static_cast<size_t>((h * nope + r) * lora + col)] = v;
        } else {
          out.w_uv_t[static_cast<size_t>((h * lora + col) * vd + r - nope)] = v;
        }
      }
    }
  }
  return out;
}

PreparedLayer prepare_layer(const LayerWeights& w, const ModelConfig& config) {
  PreparedLayer l;
  l.input_norm = dense_to_float(w.input_norm);
  l.post_attn_norm = dense_to_float(w.post_attn_norm);
  l.q_a_norm = dense_to_float(w.attn.q_a_norm);
  l.kv_a_norm = dense_to_float(w.attn.kv_a_norm);
  l.kv_b = split_kv_b(w.attn.kv_b, config);
  if (w.moe) l.router_bias = dense_to_float(w.moe->router_bias);
  return l;
}

}  // namespace hymoe
