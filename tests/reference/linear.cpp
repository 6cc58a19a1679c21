#include "linear.h"

#include <algorithm>
#include <cstring>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"

namespace hymoe::reference {
namespace {

void check_shape(const char* kind, const void* data, int64_t rows, int64_t cols, size_t x_size,
                 size_t y_size) {
  HYMOE_CHECK(data != nullptr, kInvalidArgument, "{} matrix [{}, {}] has no data", kind, rows,
              cols);
  HYMOE_CHECK(x_size == static_cast<size_t>(cols) && y_size == static_cast<size_t>(rows),
              kInvalidArgument, "{} matrix [{}, {}] applied to x[{}] -> y[{}]", kind, rows, cols,
              x_size, y_size);
}

}  // namespace

double fp8_at(const Fp8Matrix& w, int64_t row, int64_t col) {
  const uint8_t code = w.data[row * w.cols + col];
  return static_cast<double>(kFp8E4M3Table[code]) * static_cast<double>(w.scale(row, col));
}

double dense_at(const DenseMatrix& w, int64_t row, int64_t col) {
  const int64_t i = row * w.cols + col;
  switch (w.dtype) {
    case DType::kBF16: {
      uint16_t bits = 0;
      std::memcpy(&bits, static_cast<const std::byte*>(w.data) + 2 * i, 2);
      return bf16_to_float(bits);
    }
    case DType::kF16: {
      uint16_t bits = 0;
      std::memcpy(&bits, static_cast<const std::byte*>(w.data) + 2 * i, 2);
      return f16_to_float(bits);
    }
    case DType::kF32: {
      float v = 0;
      std::memcpy(&v, static_cast<const std::byte*>(w.data) + 4 * i, 4);
      return v;
    }
    default:
      HYMOE_THROW(kUnsupported, "dense tensor of dtype {} is not a float type",
                  static_cast<int>(w.dtype));
  }
}

std::vector<float> dense_row(const DenseMatrix& w, int64_t row) {
  HYMOE_CHECK(w.data != nullptr && row >= 0 && row < w.rows, kInvalidArgument,
              "row {} of a dense tensor [{}, {}]", row, w.rows, w.cols);
  std::vector<float> out(static_cast<size_t>(w.cols));
  for (int64_t j = 0; j < w.cols; ++j) out[j] = static_cast<float>(dense_at(w, row, j));
  return out;
}

void linear(const Fp8Matrix& w, std::span<const float> x, std::span<float> y) {
  check_shape("fp8", w.data, w.rows, w.cols, x.size(), y.size());
  HYMOE_CHECK(w.scale_inv != nullptr, kInvalidArgument, "fp8 matrix [{}, {}] has no scale_inv",
              w.rows, w.cols);
  for (int64_t i = 0; i < w.rows; ++i) {
    const uint8_t* row = w.data + i * w.cols;
    double acc = 0.0;
    for (int64_t j0 = 0; j0 < w.cols; j0 += Fp8Matrix::kBlock) {
      const int64_t j1 = std::min(w.cols, j0 + Fp8Matrix::kBlock);
      double part = 0.0;
      for (int64_t j = j0; j < j1; ++j) {
        part += static_cast<double>(kFp8E4M3Table[row[j]]) * static_cast<double>(x[j]);
      }
      acc += part * static_cast<double>(w.scale(i, j0));
    }
    y[i] = static_cast<float>(acc);
  }
}

namespace {

// y = W x with W's elements decoded by `decode` (one dtype per instantiation, so the lm_head of a
// 129K vocabulary stays quick enough for tests).
template <typename Elem, typename Decode>
void dense_linear(const Elem* w, int64_t rows, int64_t cols, Decode decode,
                  std::span<const float> x, std::span<float> y) {
  for (int64_t i = 0; i < rows; ++i) {
    const Elem* row = w + i * cols;
    double acc = 0.0;
    for (int64_t j = 0; j < cols; ++j) acc += static_cast<double>(decode(row[j])) * x[j];
    y[i] = static_cast<float>(acc);
  }
}

}  // namespace

void linear(const DenseMatrix& w, std::span<const float> x, std::span<float> y) {
  check_shape("dense", w.data, w.rows, w.cols, x.size(), y.size());
  switch (w.dtype) {
    case DType::kBF16:
      return dense_linear(static_cast<const uint16_t*>(w.data), w.rows, w.cols,
                          [](uint16_t b) { return bf16_to_float(b); }, x, y);
    case DType::kF16:
      return dense_linear(static_cast<const uint16_t*>(w.data), w.rows, w.cols,
                          [](uint16_t b) { return f16_to_float(b); }, x, y);
    case DType::kF32:
      return dense_linear(static_cast<const float*>(w.data), w.rows, w.cols,
                          [](float v) { return v; }, x, y);
    default:
      HYMOE_THROW(kUnsupported, "dense tensor of dtype {} is not a float type",
                  static_cast<int>(w.dtype));
  }
}

}  // namespace hymoe::reference
