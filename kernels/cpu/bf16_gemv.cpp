#include "hymoe/kernels/bf16_gemv.h"

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "variants.h"

namespace hymoe::kernels {

void validate(const Bf16GemvParams& p) {
  HYMOE_CHECK(p.w && p.x && p.y, kInvalidArgument, "bf16_gemv: null pointer");
  HYMOE_CHECK(p.rows > 0 && p.cols > 0, kInvalidArgument, "bf16_gemv: shape {}x{}", p.rows, p.cols);
  HYMOE_CHECK(p.tokens >= 1, kInvalidArgument, "bf16_gemv: tokens {}", p.tokens);
  HYMOE_CHECK(0 <= p.row_begin && p.row_begin <= p.row_end && p.row_end <= p.rows, kInvalidArgument,
              "bf16_gemv: rows [{}, {}) of {}", p.row_begin, p.row_end, p.rows);
}

void bf16_gemv(Isa isa, const Bf16GemvParams& p) {
  switch (isa) {
    case Isa::kScalar: return detail::bf16_gemv_scalar(p);
    case Isa::kAvx2: return detail::bf16_gemv_avx2(p);
    case Isa::kAvx512:
    case Isa::kAvx512Bf16: return detail::bf16_gemv_avx512(p);
  }
}

void bf16_gemv(const Bf16GemvParams& p) {
  static const Isa isa = best_isa();
  bf16_gemv(isa, p);
}

void bf16_gemv_reference(const Bf16GemvParams& p) {
  for (int64_t t = 0; t < p.tokens; ++t) {
    for (int64_t i = p.row_begin; i < p.row_end; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < p.cols; ++j) s += double(bf16_to_float(p.w[i * p.cols + j])) * p.x[t * p.cols + j];
      p.y[t * p.rows + i] = static_cast<float>(s);
    }
  }
}

}  // namespace hymoe::kernels
