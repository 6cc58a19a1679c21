// RMSNorm as DeepSeek-V3 defines it: y = weight * x / sqrt(mean(x^2) + eps).
#pragma once

#include <span>

#include "hymoe/model/model_weights.h"

namespace hymoe::reference {

// out may alias x. Throws hymoe::Error (kInvalidArgument) when the sizes of x, out and the
// weight vector differ.
void rmsnorm(std::span<const float> x, const DenseMatrix& weight, double eps, std::span<float> out);

}  // namespace hymoe::reference
