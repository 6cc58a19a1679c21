#include "hymoe/kernels/bf16_gemv.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hymoe/common/error.h"
#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

using test::nan_vector;
using test::normalised_error;
using test::random_bf16;
using test::random_f32;

// Every variant against the double reference on fresh random shapes (ragged columns, 1..9
// tokens, row ranges that split pairs), outputs NaN-poisoned. FP32 accumulation over up to 2K
// columns against double: normalised error well under 1e-5.
TEST(Bf16Gemv, EveryVariantMatchesReference) {
  std::mt19937_64 rng(std::random_device{}());
  const Isa variants[] = {Isa::kScalar, Isa::kAvx512};
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
        const size_t off = static_cast<size_t>(t * rows + p.row_begin);
        EXPECT_LT(normalised_error(y.data() + off, ref.data() + off, static_cast<size_t>(p.row_end - p.row_begin)), 1e-5)
            << isa_name(isa) << " " << rows << "x" << cols << " tokens " << tokens;
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
