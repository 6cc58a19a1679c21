#include "arrivals.h"

#include <cmath>
#include <random>

#include "hymoe/common/error.h"

namespace hymoe::bench {

std::vector<double> generate_arrivals(int n, const ArrivalConfig& c) {
  HYMOE_CHECK(n >= 0, kInvalidArgument, "request count must be non-negative, got {}", n);
  HYMOE_CHECK(c.request_rate > 0, kInvalidArgument, "--request-rate must be positive, got {}",
              c.request_rate);
  HYMOE_CHECK(c.burstiness > 0, kInvalidArgument, "--burstiness must be positive, got {}",
              c.burstiness);
  std::vector<double> t(static_cast<std::size_t>(n), 0.0);
  if (n == 0 || std::isinf(c.request_rate)) return t;

  std::mt19937_64 rng(c.seed);
  std::gamma_distribution<double> gap(c.burstiness, 1.0 / (c.request_rate * c.burstiness));
  double sum = 0;
  for (auto& x : t) {
    sum += std::isinf(c.burstiness) ? 1.0 / c.request_rate : gap(rng);
    x = sum;
  }
  if (sum > 0) {
    const double scale = (n / c.request_rate) / sum;
    for (auto& x : t) x *= scale;
  }
  return t;
}

}  // namespace hymoe::bench
