#include "hymoe/cpu/parallel_rows.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "hymoe/common/error.h"

namespace hymoe::cpu {
namespace {

// Every row in exactly one range (heads and pieces), every range aligned and inside [0, n), each
// head at least its quarters of its worker's share of units.
TEST(RowSplit, CoversEveryRowOnceInAlignedRanges) {
  const RowSplitShape shapes[] = {{}, {0, 16}, {4, 1}, {1, 3}};
  for (const RowSplitShape shape : shapes)
  for (const int64_t n : {0, 1, 15, 16, 17, 100, 576, 2048, 7168, 18432})
    for (const int64_t align : {1, 16, 32})
      for (const int workers : {1, 2, 3, 7, 16, 64}) {
        const RowSplit split(n, align, workers, shape);
        std::vector<int> seen(static_cast<size_t>(n), 0);
        auto mark = [&](RowRange r) {
          if (r.empty()) return;
          ASSERT_GE(r.begin, 0);
          ASSERT_LE(r.end, n);
          ASSERT_EQ(r.begin % align, 0) << n << " " << align << " " << workers;
          for (int64_t i = r.begin; i < r.end; ++i) ++seen[static_cast<size_t>(i)];
        };
        const int64_t units = (n + align - 1) / align;
        for (int w = 0; w < workers; ++w) {
          const RowRange h = split.head(w);
          mark(h);
          const int64_t share = units * (w + 1) / workers - units * w / workers;
          const int64_t head_units = h.empty() ? 0 : (h.end - h.begin + align - 1) / align;
          if (!h.empty() && h.end < n) {
            EXPECT_GE(4 * head_units, shape.head_quarters * share) << n << " " << workers;
          }
          if (shape.head_quarters == 0) {
            EXPECT_TRUE(h.empty());
          }
        }
        ASSERT_EQ(split.pieces(), workers * shape.pieces);
        for (int p = 0; p < split.pieces(); ++p) mark(split.piece(p));
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << "row " << i << " of " << n << ", align " << align
                                                     << ", " << workers << " workers";
      }
  EXPECT_THROW(RowSplit(10, 0, 2), Error);
  EXPECT_THROW(RowSplit(10, 16, 0), Error);
  EXPECT_THROW(RowSplit(10, 16, 2, {5, 4}), Error);
  EXPECT_THROW(RowSplit(10, 16, 2, {3, 0}), Error);
}

TEST(ParallelRows, RunsEveryRowOnceOnAPool) {
  Topology topo = Topology::synthetic("pack:1 [numa] core:8 pu:1");
  ThreadPool pool(topo);
  for (const RowSplitShape shape : {RowSplitShape{}, RowSplitShape{0, 16}})
    for (const int64_t n : {1, 37, 2048, 7168}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      for (int rep = 0; rep < 20; ++rep)
        parallel_rows(
            pool, n, 16,
            [&](int64_t b, int64_t e) {
              for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
            },
            shape);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 20) << "row " << i;
    }
}

// A worker held in its head leaves its tail to the others: the head of worker 0 waits until every
// other row is done, which can only happen when other workers ran worker 0's tail pieces.
TEST(ParallelRows, AHeldWorkersTailIsRunByTheOthers) {
  Topology topo = Topology::synthetic("pack:1 [numa] core:4 pu:1");
  ThreadPool pool(topo);
  const int64_t n = 4096;
  const RowSplit split(n, 16, pool.size());
  const RowRange head0 = split.head(0);
  std::atomic<int64_t> others_done{0};
  std::vector<std::thread::id> ran_by(static_cast<size_t>(n));
  std::atomic<bool> timed_out{false};
  parallel_rows(pool, n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ran_by[static_cast<size_t>(i)] = std::this_thread::get_id();
    if (b == head0.begin && e == head0.end) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (others_done.load() < n - (head0.end - head0.begin)) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          break;
        }
        std::this_thread::yield();
      }
      return;
    }
    others_done.fetch_add(e - b);
  });
  ASSERT_FALSE(timed_out) << "the other workers did not finish the rows outside worker 0's head";
  const std::thread::id holder = ran_by[static_cast<size_t>(head0.begin)];
  for (int p = 0; p < split.pieces(); p += pool.size()) {  // worker 0's tail pieces
    const RowRange r = split.piece(p);
    for (int64_t i = r.begin; i < r.end; ++i) EXPECT_NE(ran_by[static_cast<size_t>(i)], holder) << "row " << i;
  }
}

}  // namespace
}  // namespace hymoe::cpu
