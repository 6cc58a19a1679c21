// Row-parallel work over a ThreadPool whose shares' tails are shared out as the workers finish.
//
// A plain split (worker i gets rows [n i / W, n (i + 1) / W)) ends when its slowest worker does:
// one core slowed by a busy SMT sibling, a VM neighbour or an efficiency core holds the whole
// call. RowSplit keeps the head of each worker's share static (by default the first three
// quarters: one contiguous run, what the GEMV's prefetch wants) and cuts the rest into `pieces`
// pieces that every worker takes from one shared counter once its own head is done, the pieces
// of all shares interleaved (piece 0 of every share, then piece 1, ...). A slowed worker's tail
// is then run by the others; with equal workers each runs about its own share, as in the plain
// split. RowSplitShape{0, 16}: no static head, every share in 16 pieces.
// A worker that is not scheduled at all still holds the call: ThreadPool::run waits for every
// worker to take its turn, work or none.
// Rows go in units of `align` (whole cache lines of the output, whole 16-row groups of the GEMV).
#pragma once

#include <atomic>
#include <cstdint>

#include "hymoe/cpu/thread_pool.h"

namespace hymoe::cpu {

struct RowRange {
  int64_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
};

struct RowSplitShape {
  int head_quarters = 3;  // 0..4: the static head's part of each share, in quarters (rounded up)
  int pieces = 4;         // > 0: pieces per share's tail
};

// The partition, a pure function of (n, align, workers, shape) (tests/cpu/parallel_rows_test.cpp).
class RowSplit {
 public:
  // n rows, align > 0, workers > 0.
  RowSplit(int64_t n, int64_t align, int workers, RowSplitShape shape = {});

  int workers() const { return workers_; }
  int pieces() const { return workers_ * shape_.pieces; }
  // Worker w's static head.
  RowRange head(int w) const;
  // Shared piece p (0 <= p < pieces()): piece p / workers of worker p % workers's tail (may be
  // empty when a share is short).
  RowRange piece(int p) const;

 private:
  int64_t n_, align_, units_;
  int workers_;
  RowSplitShape shape_;
  // Worker w's share in units: [share_begin(w), share_begin(w + 1)); its head ends at head_end(w).
  int64_t share_begin(int w) const { return units_ * w / workers_; }
  int64_t head_end(int w) const;
  RowRange rows(int64_t unit_begin, int64_t unit_end) const;
};

// fn(begin, end) over every row of [0, n) exactly once, on pool's workers as RowSplit cuts them.
// Returns when all are done (one ThreadPool::run). fn must be safe to call concurrently on
// disjoint ranges.
template <typename F>
void parallel_rows(ThreadPool& pool, int64_t n, int64_t align, F&& fn, RowSplitShape shape = {}) {
  if (n <= 0) return;
  const RowSplit split(n, align, pool.size(), shape);
  alignas(64) std::atomic<int> next{0};
  pool.run([&](const WorkerInfo& w) {
    const RowRange h = split.head(w.index);
    if (!h.empty()) fn(h.begin, h.end);
    for (int p = next.fetch_add(1, std::memory_order_relaxed); p < split.pieces();
         p = next.fetch_add(1, std::memory_order_relaxed)) {
      const RowRange r = split.piece(p);
      if (!r.empty()) fn(r.begin, r.end);
    }
  });
}

}  // namespace hymoe::cpu
