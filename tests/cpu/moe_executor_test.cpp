#include "hymoe/cpu/moe_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "../test_seed.h"

namespace hymoe::cpu {
namespace {

// Random FP8 experts with block scales, owning their bytes.
struct Experts {
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::vector<float>> scales;
  std::vector<MlpWeights> views;

  Fp8Matrix make(int64_t rows, int64_t cols, std::mt19937_64& rng) {
    Fp8Matrix m;
    m.rows = rows;
    m.cols = cols;
    auto& d = data.emplace_back(static_cast<size_t>(rows * cols));
    std::uniform_int_distribution<int> code(0, 255);
    for (auto& c : d) {
      do c = static_cast<uint8_t>(code(rng));
      while ((c & 0x7F) == 0x7F);
    }
    auto& s = scales.emplace_back(static_cast<size_t>(m.scale_rows() * m.scale_cols()));
    std::uniform_real_distribution<float> sd(1e-3f, 4e-3f);
    for (auto& v : s) v = sd(rng);
    m.data = d.data();
    m.scale_inv = s.data();
    return m;
  }

  Experts(int64_t n, int64_t hidden, int64_t inter, std::mt19937_64& rng) {
    data.reserve(3 * n);
    scales.reserve(3 * n);
    for (int64_t e = 0; e < n; ++e) {
      MlpWeights w;
      w.gate = make(inter, hidden, rng);
      w.up = make(inter, hidden, rng);
      w.down = make(hidden, inter, rng);
      views.push_back(w);
    }
  }
};

struct Inputs {
  std::vector<uint16_t> hidden;
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Inputs random_inputs(int tokens, int top_k, int64_t experts, int64_t hidden, std::mt19937_64& rng) {
  Inputs in;
  std::uniform_real_distribution<float> x(-1.0f, 1.0f), w(0.05f, 1.0f);
  for (int64_t i = 0; i < tokens * hidden; ++i) in.hidden.push_back(float_to_bf16(x(rng)));
  std::vector<int32_t> all(static_cast<size_t>(experts));
  std::iota(all.begin(), all.end(), 0);
  for (int t = 0; t < tokens; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    for (int k = 0; k < top_k; ++k) {
      in.ids.push_back(all[k]);
      in.weights.push_back(w(rng));
    }
  }
  return in;
}

double normalised_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

void check_against_reference(ThreadPool& pool, const MoeTuning& tuning, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t E = 16, H = 512, I = 384;
  Experts ex(E, H, I, rng);
  MoeExecutor moe(pool, {.num_experts = E, .hidden = H, .intermediate = I, .max_top_k = 6},
                  tuning);
  for (int tokens : {1, 3, 8}) {
    for (int top_k : {1, 4, 6}) {
      Inputs in = random_inputs(tokens, top_k, E, H, rng);
      for (bool accumulate : {false, true}) {
        std::vector<float> out(static_cast<size_t>(tokens * H), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> ref(out.size());
        if (accumulate) {
          std::uniform_real_distribution<float> d(-1, 1);
          for (auto& v : out) v = d(rng);
          ref = out;
        }
        MoeBatch b{tokens, in.hidden.data(), top_k, in.ids.data(), in.weights.data(), out.data(),
                   accumulate};
        moe.run(ex.views, b);
        b.out = ref.data();
        moe_reference(ex.views, H, I, b);
        // The executor rounds silu(g)*u computed in FP32 to BF16, the reference the same value
        // computed in double: the two may land one BF16 ulp (2^-8) apart on a few elements,
        // which moves the output by ~1e-4; a wrong expert, weight or row gives O(1).
        EXPECT_LT(normalised_error(out, ref), 1e-3)
            << "tokens " << tokens << " top_k " << top_k << " accumulate " << accumulate;
        if (!tuning.steal) {
          EXPECT_EQ(moe.last_run_stats().stolen, 0);
        }
      }
    }
  }
}

TEST(MoeExecutor, MatchesReferenceOnTwoSyntheticNodes) {
  ThreadPool pool(Topology::synthetic("pack:2 [numa] core:2 pu:1"));
  check_against_reference(pool, {}, test::test_seed());
  check_against_reference(pool, {.task_bytes = 8 << 10, .steal = false}, test::test_seed());
}

TEST(MoeExecutor, MatchesReferenceOnFourSyntheticNodes) {
  ThreadPool pool(Topology::synthetic("pack:4 [numa] core:1 pu:1"));
  check_against_reference(pool, {.task_bytes = 16 << 10, .steal = true}, test::test_seed());
  check_against_reference(pool, {.task_bytes = 16 << 10, .steal = false}, test::test_seed());
}

TEST(MoeExecutor, MatchesReferenceOnThisMachine) {
  ThreadPool pool(Topology::detect());
  check_against_reference(pool, {}, test::test_seed());
}

// Bitwise the same output whatever the pool size and NUMA grouping: the tasks (rows per task) do
// not depend on the threads, and each output row is computed by one task.
TEST(MoeExecutor, ResultDoesNotDependOnThePoolSize) {
  std::mt19937_64 rng = test::make_rng();
  const int64_t E = 16, H = 512, I = 384;
  Experts ex(E, H, I, rng);
  const MoeShape shape{.num_experts = E, .hidden = H, .intermediate = I, .max_tokens = kMaxMoeTokens, .max_top_k = 6};
  const MoeTuning tuning{.task_bytes = 16 << 10, .steal = true};
  for (int tokens : {1, 3, 8}) {
    Inputs in = random_inputs(tokens, 6, E, H, rng);
    std::vector<float> first;
    for (const auto& [desc, threads] : {std::pair<const char*, int>{"pack:1 [numa] core:16 pu:1", 1},
                                        {"pack:1 [numa] core:16 pu:1", 2},
                                        {"pack:1 [numa] core:16 pu:1", 3},
                                        {"pack:1 [numa] core:16 pu:1", 16},
                                        {"pack:2 [numa] core:8 pu:1", 16}}) {
      ThreadPool pool(Topology::synthetic(desc), {.threads = threads, .pin = false, .spin_us = 50, .caller_spin_us = 1000, .caller_wait = CallerWait::kSpin});
      MoeExecutor moe(pool, shape, tuning);
      std::vector<float> out(static_cast<size_t>(tokens * H), std::numeric_limits<float>::quiet_NaN());
      moe.run(ex.views, {tokens, in.hidden.data(), 6, in.ids.data(), in.weights.data(), out.data(), false});
      if (first.empty()) {
        first = out;
        continue;
      }
      EXPECT_EQ(std::memcmp(first.data(), out.data(), sizeof(float) * out.size()), 0)
          << tokens << " tokens: " << threads << " threads on " << desc << " vs 1 thread";
    }
  }
}

// The queue's order (an expert's down tasks right behind its gate/up tasks, or behind the next
// experts' gate/up tasks) changes when rows are computed, not how: bitwise the same output, on one
// node and on two (each node's queue lagged on its own experts), with stealing.
TEST(MoeExecutor, ResultDoesNotDependOnTheQueueOrder) {
  std::mt19937_64 rng = test::make_rng();
  const int64_t E = 16, H = 512, I = 384;
  Experts ex(E, H, I, rng);
  const MoeShape shape{.num_experts = E, .hidden = H, .intermediate = I, .max_tokens = kMaxMoeTokens, .max_top_k = 6};
  for (const char* desc : {"pack:1 [numa] core:4 pu:1", "pack:2 [numa] core:2 pu:1"}) {
    ThreadPool pool(Topology::synthetic(desc), {.threads = 4, .pin = false, .spin_us = 50, .caller_spin_us = 1000, .caller_wait = CallerWait::kSpin});
    for (int tokens : {1, 2, 8}) {
      Inputs in = random_inputs(tokens, 6, E, H, rng);
      std::vector<float> first;
      for (int lag : {0, 1, 3, 100}) {
        MoeExecutor moe(pool, shape, {.task_bytes = 16 << 10, .steal = true, .down_lag = lag});
        std::vector<float> out(static_cast<size_t>(tokens * H), std::numeric_limits<float>::quiet_NaN());
        moe.run(ex.views, {tokens, in.hidden.data(), 6, in.ids.data(), in.weights.data(), out.data(), false});
        EXPECT_GE(moe.last_run_stats().barrier_wait_us, 0.0);
        EXPECT_EQ(moe.last_run_stats().tasks,
                  moe.last_run_stats().active_experts * (I / moe.gate_up_rows_per_task() +
                                                         (H + moe.down_rows_per_task() - 1) / moe.down_rows_per_task()))
            << desc << " lag " << lag;
        if (first.empty()) {
          first = out;
          continue;
        }
        EXPECT_EQ(std::memcmp(first.data(), out.data(), sizeof(float) * out.size()), 0)
            << desc << ", " << tokens << " tokens: down_lag " << lag << " vs 0";
      }
    }
  }
}

TEST(MoeExecutor, SplitsExpertsIntoTasks) {
  ThreadPool pool(Topology::synthetic("pack:2 [numa] core:1 pu:1"));
  std::mt19937_64 rng(7);
  Experts ex(4, 256, 256, rng);
  MoeExecutor moe(pool, {.num_experts = 4, .hidden = 256, .intermediate = 256, .max_top_k = 2},
                  {.task_bytes = 16 << 10});
  EXPECT_EQ(moe.gate_up_rows_per_task(), 32);  // 16 KB / (2 x 256 B)
  EXPECT_EQ(moe.down_rows_per_task(), 64);     // 16 KB / 256 B
  Inputs in = random_inputs(2, 2, 4, 256, rng);
  in.ids = {0, 3, 0, 1};
  std::vector<float> out(512);
  moe.run(ex.views, {2, in.hidden.data(), 2, in.ids.data(), in.weights.data(), out.data(), false});
  EXPECT_EQ(moe.last_run_stats().active_experts, 3);
  EXPECT_EQ(moe.last_run_stats().tasks, 3 * (256 / 32 + 256 / 64));
}

TEST(MoeExecutor, RejectsBadBatches) {
  ThreadPool pool(Topology::synthetic("pack:1 [numa] core:2 pu:1"));
  std::mt19937_64 rng(9);
  Experts ex(4, 256, 128, rng);
  MoeExecutor moe(pool, {.num_experts = 4, .hidden = 256, .intermediate = 128, .max_top_k = 2});
  Inputs in = random_inputs(1, 2, 4, 256, rng);
  std::vector<float> out(256);
  in.ids = {1, 1};
  EXPECT_THROW(moe.run(ex.views, {1, in.hidden.data(), 2, in.ids.data(), in.weights.data(), out.data(), false}), Error);
  in.ids = {1, 4};
  EXPECT_THROW(moe.run(ex.views, {1, in.hidden.data(), 2, in.ids.data(), in.weights.data(), out.data(), false}), Error);
  in.ids = {1, 2};
  EXPECT_THROW(moe.run(ex.views, {9, in.hidden.data(), 2, in.ids.data(), in.weights.data(), out.data(), false}), Error);
  EXPECT_NO_THROW(moe.run(ex.views, {1, in.hidden.data(), 2, in.ids.data(), in.weights.data(), out.data(), false}));
}

}  // namespace
}  // namespace hymoe::cpu
