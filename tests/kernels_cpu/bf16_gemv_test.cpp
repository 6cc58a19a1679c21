#include "hymoe/kernels/bf16_gemv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

using test::nan_vector;
using test::random_bf16;
using test::random_f32;

// Every variant against the double reference on fresh random shapes (ragged columns, 1..9
// tokens, row ranges that split pairs), outputs NaN-poisoned. FP32 accumulation of n products
// errs by about sqrt(n) * 6e-8 of the sum of their magnitudes (n * 6e-8 at worst); each output
// is held to 1e-5 of sum_j |w_j x_j|, which cancellation in the result cannot defeat (a
// normalised error over a few rows can: their exact sums may be near zero).
TEST(Bf16Gemv, EveryVariantMatchesReference) {
  std::mt19937_64 rng = test::make_rng();
  // kAvx512Bf16 runs the kAvx512 body.
  const Isa variants[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};
  for (Isa isa : variants) {
    if (!isa_supported(isa)) std::cout << "bf16_gemv: " << isa_name(isa) << " skipped, this CPU lacks it\n";
  }
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 300);
    const int64_t cols = 1 + static_cast<int64_t>(rng() % 2100);
    const int64_t tokens = 1 + static_cast<int64_t>(rng() % 9);
    auto w = random_bf16(static_cast<size_t>(rows * cols), rng);
    auto x = random_f32(static_cast<size_t>(tokens * cols), rng);
    Bf16GemvParams p;
    p.w = w.data();
    p.rows = rows;
    p.cols = cols;
    p.x = x.data();
    p.tokens = tokens;
    p.row_begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
    p.row_end = p.row_begin + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - p.row_begin));
    auto ref = nan_vector(static_cast<size_t>(tokens * rows));
    p.y = ref.data();
    bf16_gemv_reference(p);
    for (Isa isa : variants) {
      if (!isa_supported(isa)) continue;
      auto y = nan_vector(static_cast<size_t>(tokens * rows));
      p.y = y.data();
      validate(p);
      bf16_gemv(isa, p);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t i = 0; i < rows; ++i) {
          const float v = y[static_cast<size_t>(t * rows + i)];
          const bool inside = i >= p.row_begin && i < p.row_end;
          ASSERT_EQ(std::isnan(v), !inside) << isa_name(isa) << " row " << i << " token " << t;
        }
        for (int64_t i = p.row_begin; i < p.row_end; ++i) {
          double magnitude = 0.0;
          for (int64_t j = 0; j < cols; ++j) {
            magnitude += std::fabs(double(bf16_to_float(w[static_cast<size_t>(i * cols + j)])) *
                                   x[static_cast<size_t>(t * cols + j)]);
          }
          const size_t at = static_cast<size_t>(t * rows + i);
          ASSERT_LE(std::fabs(double(y[at]) - ref[at]), 1e-5 * magnitude + 1e-30)
              << isa_name(isa) << " " << rows << "x" << cols << " token " << t << " row " << i;
        }
      }
    }
  }
}

TEST(Bf16Gemv, ValidateNamesTheProblem) {
  uint16_t w[4] = {};
  float x[2] = {}, y[2] = {};
  Bf16GemvParams p{w, 2, 2, x, 1, y, 0, 3};
  EXPECT_THROW(validate(p), Error);
  p.row_end = 2;
  EXPECT_NO_THROW(validate(p));
  p.tokens = 0;
  EXPECT_THROW(validate(p), Error);
}

}  // namespace
}  // namespace hymoe::kernels
