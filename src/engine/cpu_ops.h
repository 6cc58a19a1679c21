// Building blocks of the CPU executor, each spread over the worker pool. Activations entering a
// linear layer are BF16 (what the kernels read); results are FP32.
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/model/model_weights.h"

namespace hymoe::engine {

// Grows a step buffer to at least n elements (a no-op once sized: steps do not allocate).
template <typename T>
T* room(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Splits [0, n) into one contiguous range per worker, rounded to `align`; fn(begin, end) runs on
// every worker with a non-empty range.
template <typename F>
void parallel_for(cpu::ThreadPool& pool, int64_t n, int64_t align, F&& fn) {
  const int64_t workers = pool.size();
  const int64_t units = (n + align - 1) / align;
  pool.run([&](const cpu::WorkerInfo& w) {
    const int64_t b = units * w.index / workers * align;
    const int64_t e = std::min<int64_t>(n, units * (w.index + 1) / workers * align);
    if (b < e) fn(b, e);
  });
}

// y[t][0..w.rows) = W x[t] for t < tokens. x: BF16 [tokens][x_stride]; y: FP32 [tokens][w.rows].
// Rows [0, decode_rows) are decode tokens: GEMV, up to 8 sharing a pass over the weights; the
// other rows are prompt tokens: the prefill GEMM, however few. Both kernels compute a row
// independently of the rows beside it, so a row's result depends only on its kind (batch
// invariance: a request's output does not change with the server's load). amx: the decode rows
// through kernels::fp8_gemv_amx (the caller checked fp8_gemv_amx_supported(); rows are as
// independent there), else kernels::fp8_gemv.
void fp8_linear(cpu::ThreadPool& pool, const Fp8Matrix& w, const uint16_t* x, int64_t x_stride,
                int64_t tokens, int64_t decode_rows, float* y, bool amx);

// y[t][0..rows) = M x[t] for a dense matrix (lm_head, router): BF16 through the bf16_gemv kernel,
// F16/F32 through a plain loop. x FP32 [tokens][cols].
void dense_linear(cpu::ThreadPool& pool, const DenseMatrix& m, const float* x, int64_t tokens, float* y);

}  // namespace hymoe::engine
