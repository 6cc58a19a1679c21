#include "hymoe/kernels/mla_attention.h"

#include <cmath>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "mla_attention_layout.h"
#include "variants.h"

namespace hymoe::kernels {

void validate(const MlaAttentionParams& p) {
  HYMOE_CHECK(p.q_lat && p.q_pe && p.pages && p.out, kInvalidArgument, "mla_attention: null pointer");
  HYMOE_CHECK(p.lora > 0 && p.lora % 64 == 0, kInvalidArgument, "mla_attention: lora {} (a multiple of 64)", p.lora);
  HYMOE_CHECK(p.rope > 0 && p.rope % 32 == 0, kInvalidArgument, "mla_attention: rope {} (a multiple of 32)", p.rope);
  HYMOE_CHECK(p.first_position >= 0, kInvalidArgument, "mla_attention: first_position {}", p.first_position);
  HYMOE_CHECK(0 <= p.token_begin && p.token_begin < p.token_end, kInvalidArgument, "mla_attention: tokens [{}, {})",
              p.token_begin, p.token_end);
  HYMOE_CHECK(0 <= p.head_begin && p.head_begin < p.head_end, kInvalidArgument, "mla_attention: heads [{}, {})",
              p.head_begin, p.head_end);
  HYMOE_CHECK(p.page_tokens > 0, kInvalidArgument, "mla_attention: page_tokens {}", p.page_tokens);
  HYMOE_CHECK(std::isfinite(p.scale) && p.scale > 0.0f, kInvalidArgument, "mla_attention: scale {}", p.scale);
}

void mla_attention(Isa isa, const MlaAttentionParams& p, MlaAttentionScratch& scratch) {
  if (isa == Isa::kAvx512Bf16) return detail::mla_attention_avx512bf16(p, scratch);
  if (isa == Isa::kAvx512) return detail::mla_attention_avx512(p, scratch);
  detail::mla_attention_scalar(p, scratch);
}

void mla_attention(const MlaAttentionParams& p, MlaAttentionScratch& scratch) {
  static const Isa isa = best_isa();
  mla_attention(isa, p, scratch);
}

void validate(const MlaAbsorbParams& p) {
  HYMOE_CHECK(p.w && p.x && p.y, kInvalidArgument, "mla_absorb: null pointer");
  HYMOE_CHECK(p.k > 0 && p.n > 0 && p.n % 16 == 0, kInvalidArgument, "mla_absorb: shape {}x{} (n a multiple of 16)", p.k, p.n);
  HYMOE_CHECK(p.tokens >= 1, kInvalidArgument, "mla_absorb: tokens {}", p.tokens);
  HYMOE_CHECK(p.x_stride >= p.k && p.y_stride >= p.n, kInvalidArgument, "mla_absorb: strides {}, {}", p.x_stride, p.y_stride);
}

void mla_absorb(Isa isa, const MlaAbsorbParams& p) {
  if (isa == Isa::kAvx512 || isa == Isa::kAvx512Bf16) return detail::mla_absorb_avx512(p);
  detail::mla_absorb_scalar(p);
}

void mla_absorb(const MlaAbsorbParams& p) {
  static const Isa isa = best_isa();
  mla_absorb(isa, p);
}

void mla_absorb_reference(const MlaAbsorbParams& p) {
  for (int64_t t = 0; t < p.tokens; ++t) {
    for (int64_t c = 0; c < p.n; ++c) {
      double s = 0.0;
      for (int64_t i = 0; i < p.k; ++i) s += double(p.x[t * p.x_stride + i]) * bf16_to_float(p.w[i * p.n + c]);
      p.y[t * p.y_stride + c] = static_cast<float>(s);
    }
  }
}

void mla_attention_reference(const MlaAttentionParams& p, float* err_scale) {
  const detail::MlaRows rows(p);
  const int64_t width = p.lora + p.rope;
  std::vector<double> q(static_cast<size_t>(width)), s, o(static_cast<size_t>(p.lora)), a(static_cast<size_t>(p.lora));
  for (int64_t i = 0; i < rows.count; ++i) {
    for (int64_t c = 0; c < p.lora; ++c) q[static_cast<size_t>(c)] = bf16_to_float(float_to_bf16(rows.q_lat(p, i)[c]));
    for (int64_t c = 0; c < p.rope; ++c) q[static_cast<size_t>(p.lora + c)] = bf16_to_float(float_to_bf16(rows.q_pe(p, i)[c]));
    const int64_t n = rows.position(p, i) + 1;
    s.assign(static_cast<size_t>(n), 0.0);
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t* k = detail::mla_cache_row(p, j);
      double d = 0.0;
      for (int64_t c = 0; c < width; ++c) d += q[static_cast<size_t>(c)] * bf16_to_float(k[c]);
      s[static_cast<size_t>(j)] = d * p.scale;
      mx = std::max(mx, s[static_cast<size_t>(j)]);
    }
    double sum = 0.0;
    std::fill(o.begin(), o.end(), 0.0);
    std::fill(a.begin(), a.end(), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      const double e = std::exp(s[static_cast<size_t>(j)] - mx);
      sum += e;
      const uint16_t* v = detail::mla_cache_row(p, j);
      for (int64_t c = 0; c < p.lora; ++c) {
        const double x = bf16_to_float(v[c]);
        o[static_cast<size_t>(c)] += e * x;
        a[static_cast<size_t>(c)] += e * std::abs(x);
      }
    }
    float* out = rows.out(p, i);
    for (int64_t c = 0; c < p.lora; ++c) out[c] = static_cast<float>(o[static_cast<size_t>(c)] / sum);
    if (err_scale) {
      float* e = err_scale + (out - p.out);
      for (int64_t c = 0; c < p.lora; ++c) e[c] = static_cast<float>(a[static_cast<size_t>(c)] / sum);
    }
  }
}

}  // namespace hymoe::kernels
