// The FP8 weight matrix as the CPU kernels take it: a plain view (pointers, shape, block scales)
// of the checkpoint's form. The kernels own this type and depend on nothing above them; the model
// (hymoe/model/model_weights.h) holds its weights as these views.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hymoe {

struct Fp8SpecialCodes;  // hymoe/kernels/fp8_special_codes.h

namespace kernels {

// W[i][j] = fp8_e4m3(data[i * cols + j]) * scale_inv[(i / 128) * scale_cols() + j / 128], shape
// [rows = out, cols = in], row-major. Points into memory owned elsewhere; never copied.
struct Fp8MatrixView {
  static constexpr int64_t kBlock = 128;
  const uint8_t* data = nullptr;
  const float* scale_inv = nullptr;  // [scale_rows(), scale_cols()] row-major
  int64_t rows = 0;
  int64_t cols = 0;
  // Optional: the matrix's special codes (find_fp8_special_codes), owned elsewhere. With them the
  // AVX512-BF16 GEMV decodes by shifts and corrects those codes; without, by table.
  const Fp8SpecialCodes* specials = nullptr;

  int64_t scale_rows() const { return (rows + kBlock - 1) / kBlock; }
  int64_t scale_cols() const { return (cols + kBlock - 1) / kBlock; }
  float scale(int64_t row, int64_t col) const {
    return scale_inv[(row / kBlock) * scale_cols() + col / kBlock];
  }
  size_t bytes() const { return static_cast<size_t>(rows * cols); }
};

}  // namespace kernels
}  // namespace hymoe
