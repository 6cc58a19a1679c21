// linear() and rmsnorm() against explicit dequantisation and the textbook formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "linear.h"
#include "random_weights.h"
#include "rmsnorm.h"
#include "test_util.h"

namespace hymoe::reference {
namespace {

using testing::nan_vector;
using testing::random_vector;
using testing::rel_error;

TEST(ReferenceLinear, Fp8MatchesExplicitDequantisation) {
  // Shapes that are not multiples of 128 exercise the partial scale blocks.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{300, 200}, {128, 384}, {5, 129}}) {
    testing::RandomWeights store(testing::tiny_test_config(), 1000 + rows);
    const Fp8Matrix w = store.fp8(rows, cols, 0.3);
    std::mt19937_64 rng(rows * 7 + cols);
    const std::vector<float> x = random_vector(static_cast<size_t>(cols), rng);
    std::vector<double> expect(static_cast<size_t>(rows), 0.0);
    const int64_t scale_cols = (cols + 127) / 128;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const double wij = static_cast<double>(fp8_e4m3_to_float(w.data[i * cols + j])) *
                           w.scale_inv[(i / 128) * scale_cols + j / 128];
        expect[i] += wij * x[j];
      }
    }
    std::vector<float> y = nan_vector(static_cast<size_t>(rows));
    linear(w, x, y);
    EXPECT_LT(rel_error(y, expect), 1e-6) << rows << "x" << cols;
  }
}

TEST(ReferenceLinear, DenseBf16MatchesHand) {
  testing::RandomWeights store(testing::tiny_test_config(), 7);
  const DenseMatrix w = store.bf16(33, 70, 0.0, 0.5);
  std::mt19937_64 rng(8);
  const std::vector<float> x = random_vector(70, rng);
  const auto* bits = static_cast<const uint16_t*>(w.data);
  std::vector<double> expect(33, 0.0);
  for (int i = 0; i < 33; ++i) {
    for (int j = 0; j < 70; ++j) expect[i] += double{bf16_to_float(bits[i * 70 + j])} * x[j];
  }
  std::vector<float> y = nan_vector(33);
  linear(w, x, y);
  EXPECT_LT(rel_error(y, expect), 1e-6);
}

TEST(ReferenceLinear, DenseF32AndF16MatchHand) {
  testing::RandomWeights store(testing::tiny_test_config(), 17);
  const DenseMatrix w = store.f32(21, 130, 0.0, 0.5);
  std::mt19937_64 rng(18);
  const std::vector<float> x = random_vector(130, rng);
  const auto* v = static_cast<const float*>(w.data);
  std::vector<uint16_t> halves(21 * 130);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = float_to_f16(v[i]);
  const DenseMatrix h{DType::kF16, halves.data(), 21, 130};
  std::vector<double> expect32(21, 0.0), expect16(21, 0.0);
  for (int i = 0; i < 21; ++i) {
    for (int j = 0; j < 130; ++j) {
      expect32[i] += double{v[i * 130 + j]} * x[j];
      expect16[i] += double{f16_to_float(halves[i * 130 + j])} * x[j];
    }
  }
  std::vector<float> y = nan_vector(21);
  linear(w, x, y);
  EXPECT_LT(rel_error(y, expect32), 1e-6);
  y = nan_vector(21);
  linear(h, x, y);
  EXPECT_LT(rel_error(y, expect16), 1e-6);
  EXPECT_GT(rel_error(y, expect32), 1e-6);  // the F16 rounding is visible: F16 was really read
}

TEST(ReferenceLinear, ShapeMismatchIsAnError) {
  testing::RandomWeights store(testing::tiny_test_config(), 9);
  const Fp8Matrix w = store.fp8(10, 20, 1.0);
  std::vector<float> x(19), y(10);
  EXPECT_THROW(linear(w, x, y), Error);
}

TEST(ReferenceRmsnorm, MatchesFormula) {
  testing::RandomWeights store(testing::tiny_test_config(), 11);
  const DenseMatrix g = store.f32(1, 300, 1.0, 0.2);
  std::mt19937_64 rng(12);
  const std::vector<float> x = random_vector(300, rng, 3.0);
  double ms = 0.0;
  for (float v : x) ms += double{v} * v / 300.0;
  const double eps = 1e-6;
  std::vector<double> expect(300);
  for (int i = 0; i < 300; ++i) {
    expect[i] = double{static_cast<const float*>(g.data)[i]} * x[i] / std::sqrt(ms + eps);
  }
  std::vector<float> y = nan_vector(300);
  rmsnorm(x, g, eps, y);
  EXPECT_LT(rel_error(y, expect), 1e-7);
  // In place gives the same.
  std::vector<float> z = x;
  rmsnorm(z, g, eps, z);
  EXPECT_EQ(z, y);
  // eps matters for tiny inputs: with x = 1e-4 everywhere and eps 1e-6, rms^2 + eps = 1.01e-6.
  std::vector<float> small(300, 1e-4f), out = nan_vector(300);
  rmsnorm(small, g, 1e-6, out);
  EXPECT_NEAR(out[0], static_cast<const float*>(g.data)[0] * 1e-4 / std::sqrt(1.01e-6), 1e-6);
}

}  // namespace
}  // namespace hymoe::reference
