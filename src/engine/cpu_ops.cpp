#include "cpu_ops.h"

#include <algorithm>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/cpu/parallel_rows.h"
#include "hymoe/kernels/bf16_gemv.h"
#include "hymoe/kernels/fp8_gemm.h"
#include "hymoe/kernels/fp8_gemv.h"

namespace hymoe::engine {

void fp8_linear(cpu::ThreadPool& pool, const Fp8Matrix& w, const uint16_t* x, int64_t x_stride, int64_t tokens,
                int64_t decode_rows, float* y, bool amx) {
  HYMOE_CHECK(decode_rows >= 0 && decode_rows <= tokens, kInternal, "fp8_linear: {} decode rows of {}",
              decode_rows, tokens);
  for (int64_t t0 = 0; t0 < decode_rows; t0 += kernels::kMaxGemvBatch) {
    const int batch = static_cast<int>(std::min<int64_t>(kernels::kMaxGemvBatch, decode_rows - t0));
    const kernels::Fp8GemvParams p =
        kernels::Fp8GemvParams::strided(w, batch, x + t0 * x_stride, x_stride, y + t0 * w.rows, w.rows);
    // Rows in 16-row units keep each worker's output in whole cache lines. parallel_rows: each
    // worker's last quarter shared out as the workers finish (on the 16-core Xeon one 14.7 MB GEMV
    // at 16 threads ran 18-21% faster than with one static range per worker).
    cpu::parallel_rows(pool, w.rows, 16, [&](int64_t b, int64_t e) {
      kernels::Fp8GemvParams q = p;
      q.row_begin = b;
      q.row_end = e;
      if (amx)
        kernels::fp8_gemv_amx(q);
      else
        kernels::fp8_gemv(q);
    });
  }
  if (decode_rows == tokens) return;
  kernels::Fp8GemmParams p;
  p.w = w;
  p.x = x + decode_rows * x_stride;
  p.x_stride = x_stride;
  p.m = tokens - decode_rows;
  p.c = y + decode_rows * w.rows;
  p.c_stride = w.rows;
  parallel_for(pool, w.rows, 32, [&](int64_t b, int64_t e) {
    kernels::Fp8GemmParams q = p;
    q.n_begin = b;
    q.n_end = e;
    kernels::fp8_gemm(q);
  });
}

namespace {

template <typename Load>
void dense_rows(const float* x, int64_t tokens, int64_t cols, int64_t rows, int64_t b, int64_t e, float* y,
                Load&& load) {
  constexpr int64_t kT = 4;  // tokens per pass over a row
  for (int64_t t0 = 0; t0 < tokens; t0 += kT) {
    const int64_t nt = std::min(kT, tokens - t0);
    for (int64_t i = b; i < e; ++i) {
      float acc[kT][16] = {};
      int64_t j = 0;
      for (; j + 16 <= cols; j += 16) {
        float wv[16];
        for (int k = 0; k < 16; ++k) wv[k] = load(i, j + k);
        for (int64_t t = 0; t < nt; ++t) {
          const float* xr = x + (t0 + t) * cols + j;
          for (int k = 0; k < 16; ++k) acc[t][k] += wv[k] * xr[k];
        }
      }
      for (int64_t t = 0; t < nt; ++t) {
        float s = 0.0f;
        for (int k = 0; k < 16; ++k) s += acc[t][k];
        for (int64_t jj = j; jj < cols; ++jj) s += load(i, jj) * x[(t0 + t) * cols + jj];
        y[(t0 + t) * rows + i] = s;
      }
    }
  }
}

}  // namespace

void dense_linear(cpu::ThreadPool& pool, const DenseMatrix& m, const float* x, int64_t tokens, float* y) {
  const int64_t rows = m.rows, cols = m.cols;
  parallel_for(pool, rows, 16, [&](int64_t b, int64_t e) {
    switch (m.dtype) {
      case DType::kBF16: {
        kernels::Bf16GemvParams p;
        p.w = static_cast<const uint16_t*>(m.data);
        p.rows = rows;
        p.cols = cols;
        p.x = x;
        p.tokens = tokens;
        p.y = y;
        p.row_begin = b;
        p.row_end = e;
        kernels::bf16_gemv(p);
        break;
      }
      case DType::kF16: {
        const auto* w = static_cast<const uint16_t*>(m.data);
        dense_rows(x, tokens, cols, rows, b, e, y, [w, cols](int64_t i, int64_t j) { return f16_to_float(w[i * cols + j]); });
        break;
      }
      case DType::kF32: {
        const auto* w = static_cast<const float*>(m.data);
        dense_rows(x, tokens, cols, rows, b, e, y, [w, cols](int64_t i, int64_t j) { return w[i * cols + j]; });
        break;
      }
      default:
        HYMOE_THROW(kUnsupported, "dense_linear: dtype {} is not supported", dtype_name(m.dtype));
    }
  });
}

}  // namespace hymoe::engine
