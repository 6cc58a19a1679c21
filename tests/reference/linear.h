// Reading checkpoint weights the plain way: element access and matrix-vector products over the
// FP8 block-scaled and dense (BF16/F16/F32) views of ModelWeights, accumulated in double.
// Slow on purpose: this is the oracle the optimised kernels are compared with.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hymoe/model/model_weights.h"

namespace hymoe::reference {

// W[row][col] = fp8(data) * scale_inv[row/128][col/128], exactly (in double).
double fp8_at(const Fp8Matrix& w, int64_t row, int64_t col);

// Element of a dense tensor as double, whatever its dtype (BF16, F16 or F32).
// Throws hymoe::Error (kUnsupported) for other dtypes.
double dense_at(const DenseMatrix& w, int64_t row, int64_t col);

// One row of a dense tensor (a vector has one row) as float.
std::vector<float> dense_row(const DenseMatrix& w, int64_t row);

// y = W x with W [rows, cols] dequantised on the fly: each 128-column block's partial sum is
// accumulated in double and scaled by its block's scale_inv. Throws hymoe::Error
// (kInvalidArgument) when x.size() != cols or y.size() != rows, or the view has no data.
void linear(const Fp8Matrix& w, std::span<const float> x, std::span<float> y);

// y = W x for a dense [rows, cols] tensor, double accumulation. Same checks as above.
void linear(const DenseMatrix& w, std::span<const float> x, std::span<float> y);

}  // namespace hymoe::reference
