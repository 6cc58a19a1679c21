// Many distinct FP8 matrices of one shape in one huge-page buffer, first-touched by the workers
// that read their rows: the working set that keeps GEMV benchmarks out of the caches.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "bench_context.h"
#include "hymoe/kernels/fp8_matrix.h"

namespace hymoe::bench {

class Fp8MatrixSet {
 public:
  Fp8MatrixSet(int64_t rows, int64_t cols, size_t count, cpu::ThreadPool& pool);
  const std::vector<kernels::Fp8MatrixView>& matrices() const { return mats_; }
  // Rows [first, second) of worker `worker` of `workers` (multiples of 16).
  std::pair<int64_t, int64_t> row_range(int worker, int workers) const;

 private:
  int64_t rows_, cols_;
  HugeBuffer buf_;
  std::vector<float> scales_;
  std::vector<kernels::Fp8MatrixView> mats_;
};

}  // namespace hymoe::bench
