// Test helpers for the CPU kernels: random FP8 matrices with block scales, random BF16 inputs
// from a printed seed (make_rng: ../test_seed.h), NaN poisoning and normalised error.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "hymoe/common/numeric.h"
#include "hymoe/kernels/fp8_matrix.h"
#include "../test_seed.h"

namespace hymoe::test {

// Owns the bytes behind an Fp8MatrixView.
struct RandomFp8Matrix {
  std::vector<uint8_t> data;
  std::vector<float> scale;
  kernels::Fp8MatrixView view;

  // Codes uniform over every finite code (subnormals and negative zero included), scales in
  // [2^-10, 2^-6) like a quantised checkpoint. subnormal_only: exponent-0 codes alone.
  RandomFp8Matrix(int64_t rows, int64_t cols, std::mt19937_64& rng, bool subnormal_only = false) {
    data.resize(static_cast<size_t>(rows * cols));
    std::uniform_int_distribution<int> code(0, 255);
    for (auto& c : data) {
      int v;
      do {
        v = code(rng);
        if (subnormal_only) v &= 0x87;
      } while ((v & 0x7F) == 0x7F);
      c = static_cast<uint8_t>(v);
    }
    view.rows = rows;
    view.cols = cols;
    scale.resize(static_cast<size_t>(view.scale_rows() * view.scale_cols()));
    std::uniform_real_distribution<float> s(std::ldexp(1.0f, -10), std::ldexp(1.0f, -6));
    for (auto& v : scale) v = s(rng);
    view.data = data.data();
    view.scale_inv = scale.data();
  }
};

inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng, float range = 2.0f) {
  std::uniform_real_distribution<float> d(-range, range);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16(d(rng));
  return v;
}

inline std::vector<float> random_f32(size_t n, std::mt19937_64& rng, float lo = -2.0f,
                                     float hi = 2.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<float> nan_vector(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// ||a - b|| / ||b|| over the indices where want[i] is finite; infinity if a has a NaN there.
inline double normalised_error(const float* a, const float* b, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace hymoe::test
