#include "rmsnorm.h"

#include <cmath>

#include "hymoe/common/error.h"
#include "linear.h"

namespace hymoe::reference {

void rmsnorm(std::span<const float> x, const DenseMatrix& weight, double eps, std::span<float> out) {
  HYMOE_CHECK(x.size() == out.size() && weight.rows * weight.cols == static_cast<int64_t>(x.size()),
              kInvalidArgument, "rmsnorm over {} values with a weight of {} and output of {}",
              x.size(), weight.rows * weight.cols, out.size());
  double sum_sq = 0.0;
  for (float v : x) sum_sq += static_cast<double>(v) * v;
  const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(x.size()) + eps);
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = static_cast<float>(dense_at(weight, 0, static_cast<int64_t>(i)) * x[i] * inv_rms);
  }
}

}  // namespace hymoe::reference
