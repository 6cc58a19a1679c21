// Helpers of the executor tests: logits compared by normalised error, greedy choice.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace hymoe::test {

// ||a - ref|| / ||ref||; +inf when a holds a NaN or an infinity (an unwritten poisoned value).
inline double rel_error(std::span<const float> a, std::span<const float> ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

inline int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace hymoe::test
