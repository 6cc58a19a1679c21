// Helpers of the executor tests: logits compared by normalised error, greedy choice, random MoE
// routing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

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

// A MoE layer's routing for `tokens` tokens: top_k distinct experts of `experts` each, weights
// in [0.1, 1.0), [tokens * top_k] in token order.
struct RandomRouting {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
inline RandomRouting random_routing(int tokens, int experts, int top_k, std::mt19937& rng) {
  RandomRouting r;
  std::vector<int32_t> all(static_cast<size_t>(experts));
  for (int t = 0; t < tokens; ++t) {
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    for (int k = 0; k < top_k; ++k) {
      r.ids.push_back(all[static_cast<size_t>(k)]);
      r.weights.push_back(0.1f + 0.9f * static_cast<float>(rng() % 1000) / 1000.0f);
    }
  }
  return r;
}

}  // namespace hymoe::test
