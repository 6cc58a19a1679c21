// Small helpers shared by the reference tests.
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace hymoe::reference::testing {

inline std::vector<float> random_vector(size_t n, std::mt19937_64& rng, double stddev = 1.0) {
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(normal(rng));
  return v;
}

inline std::vector<float> nan_vector(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// ||a - b|| / ||b||; infinity when any value of a is not finite.
inline double rel_error(std::span<const float> a, std::span<const double> b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

inline double rel_error(std::span<const float> a, std::span<const float> b) {
  std::vector<double> bd(b.begin(), b.end());
  return rel_error(a, bd);
}

}  // namespace hymoe::reference::testing
