// Batch invariance of the linear kernels: a row's result must not depend on which other rows
// share the call (bitwise), so that a request's output does not change with the server's load.
// GEMV: batch 1..8 against batch 1; GEMM: M rows against each row alone and against other M;
// BF16 GEMV: tokens 1..8 against 1; GEMV rows split over 1, 2, 3, 16 workers (and at random row
// boundaries) against one call over every row; the FP8 GEMV checks cover every ISA variant, the
// AMX one, the shift decode (a matrix with its special codes) and rows in turn. Fresh random inputs each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/kernels/bf16_gemv.h"
#include "hymoe/kernels/fp8_gemm.h"
#include "hymoe/kernels/fp8_gemv.h"
#include "hymoe/kernels/fp8_special_codes.h"
#include "gemv_variants.h"
#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, sizeof(float) * n) == 0; }

using test::GemvVariant;
using test::gemv_variants;

TEST(BatchInvariance, Fp8GemvRowDoesNotDependOnTheBatch) {
  std::mt19937_64 rng = test::make_rng();
  for (const GemvVariant& v : gemv_variants()) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{200, 7168}, {96, 2048}, {130, 384}, {72, 1000}}) {
      test::RandomFp8Matrix w(n, k, rng);
      const auto x = test::random_bf16(static_cast<size_t>(8 * k), rng);
      std::vector<float> alone(static_cast<size_t>(8 * n)), batched(static_cast<size_t>(8 * n));
      for (int b = 0; b < 8; ++b) {
        auto p = Fp8GemvParams::strided(w.view, 1, x.data() + b * k, k, alone.data() + b * n, n);
        v.run(p);
      }
      for (int batch = 2; batch <= 8; ++batch) {
        auto p = Fp8GemvParams::strided(w.view, batch, x.data(), k, batched.data(), n);
        v.run(p);
        for (int b = 0; b < batch; ++b)
          EXPECT_TRUE(same_bits(alone.data() + b * n, batched.data() + b * n, n))
              << v.name() << " " << n << "x" << k << ": row " << b << " of batch " << batch;
      }
    }
  }
}

// Threads split a GEMV's rows (16-row units, as fp8_linear and the benchmarks do, or any
// boundary, as the MoE executor's tasks may): a row's result must not depend on the split, so
// the output is the same at every thread count. The parts pass the next part as prefetch_next.
TEST(BatchInvariance, Fp8GemvRowDoesNotDependOnTheRowSplit) {
  std::mt19937_64 rng = test::make_rng();
  for (const GemvVariant& v : gemv_variants()) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{448, 2048}, {256, 7168}, {200, 384}}) {
      test::RandomFp8Matrix w(n, k, rng);
      const auto x = test::random_bf16(static_cast<size_t>(3 * k), rng);
      for (const int batch : {1, 3}) {
        std::vector<float> whole(static_cast<size_t>(batch * n));
        v.run(Fp8GemvParams::strided(w.view, batch, x.data(), k, whole.data(), n));
        // Row boundaries of each split: workers in 16-row units, then random cut points.
        std::vector<std::vector<int64_t>> splits;
        for (const int64_t workers : {1, 2, 3, 16}) {
          const int64_t units = (n + 15) / 16;
          std::vector<int64_t> cuts;
          for (int64_t i = 0; i <= workers; ++i) cuts.push_back(std::min(n, units * i / workers * 16));
          splits.push_back(cuts);
        }
        std::vector<int64_t> cuts{0};
        std::uniform_int_distribution<int64_t> step(1, 37);
        while (cuts.back() < n) cuts.push_back(std::min(n, cuts.back() + step(rng)));
        splits.push_back(cuts);
        for (const auto& c : splits) {
          auto part = test::nan_vector(static_cast<size_t>(batch * n));
          for (size_t i = 0; i + 1 < c.size(); ++i) {
            auto p = Fp8GemvParams::strided(w.view, batch, x.data(), k, part.data(), n);
            p.row_begin = c[i];
            p.row_end = c[i + 1];
            // As a caller that knows its next call would (a prefetch hint: must not change results).
            if (i + 2 < c.size()) p.prefetch_next = w.view.data + c[i + 1] * k;
            v.run(p);
          }
          EXPECT_TRUE(same_bits(whole.data(), part.data(), batch * n))
              << v.name() << " " << n << "x" << k << " batch " << batch << ": split into "
              << c.size() - 1 << " parts";
        }
      }
    }
  }
}

// The software-prefetch settings (GemvPrefetch) only move data: bitwise the same results.
TEST(BatchInvariance, Fp8GemvDoesNotDependOnThePrefetchSetting) {
  std::mt19937_64 rng = test::make_rng();
  const GemvPrefetch saved = gemv_prefetch();
  for (const Isa isa : supported_isas()) {
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{136, 2048}, {40, 7168}}) {
      test::RandomFp8Matrix w(n, k, rng);
      const auto x = test::random_bf16(static_cast<size_t>(2 * k), rng);
      for (const int batch : {1, 2}) {
        set_gemv_prefetch(saved);
        std::vector<float> want(static_cast<size_t>(batch * n));
        fp8_gemv(isa, Fp8GemvParams::strided(w.view, batch, x.data(), k, want.data(), n));
        for (const GemvPrefetch pf : {GemvPrefetch{.distance = -1, .l1_bytes = 0, .first_pass = false},
                                      GemvPrefetch{.distance = 4096, .l1_bytes = int64_t{1} << 40, .first_pass = true},
                                      GemvPrefetch{.distance = 0, .l1_bytes = 16 << 10, .first_pass = true},
                                      GemvPrefetch{.distance = 4096, .l1_bytes = 0, .first_pass = true, .row_blocks = 4},
                                      GemvPrefetch{.distance = 0, .l1_bytes = 0, .first_pass = false, .row_blocks = 8},
                                      GemvPrefetch{.distance = -1, .l1_bytes = 0, .first_pass = true, .row_blocks = 4,
                                                   .row_streams = 2},
                                      GemvPrefetch{.distance = -1, .l1_bytes = 16 << 10, .first_pass = true,
                                                   .row_blocks = 2, .row_streams = 4}}) {
          set_gemv_prefetch(pf);
          auto got = test::nan_vector(static_cast<size_t>(batch * n));
          fp8_gemv(isa, Fp8GemvParams::strided(w.view, batch, x.data(), k, got.data(), n));
          EXPECT_TRUE(same_bits(want.data(), got.data(), batch * n))
              << isa_name(isa) << " " << n << "x" << k << " batch " << batch << ": distance " << pf.distance
              << " l1_bytes " << pf.l1_bytes << " first_pass " << pf.first_pass << " row_blocks " << pf.row_blocks
              << " row_streams " << pf.row_streams;
        }
      }
    }
  }
  set_gemv_prefetch(saved);
  EXPECT_THROW(set_gemv_prefetch(GemvPrefetch{.row_blocks = 3}), Error);
  EXPECT_THROW(set_gemv_prefetch(GemvPrefetch{.row_blocks = 8, .row_streams = 2}), Error);
  EXPECT_EQ(gemv_prefetch().row_blocks, saved.row_blocks);
  EXPECT_EQ(gemv_prefetch().row_streams, saved.row_streams);
}

// The same for the AMX variant's settings (AmxGemvPrefetch), batch 1 and 3, on row counts with a
// partial last group (the prefetch distance is cut to the call's last group).
TEST(BatchInvariance, Fp8GemvAmxDoesNotDependOnThePrefetchSetting) {
  if (!fp8_gemv_amx_supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  std::mt19937_64 rng = test::make_rng();
  const AmxGemvPrefetch saved = amx_gemv_prefetch();
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{136, 2048}, {40, 7168}}) {
    test::RandomFp8Matrix w(n, k, rng);
    const auto x = test::random_bf16(static_cast<size_t>(3 * k), rng);
    for (const int batch : {1, 3}) {
      set_amx_gemv_prefetch(saved);
      std::vector<float> want(static_cast<size_t>(batch * n));
      fp8_gemv_amx(Fp8GemvParams::strided(w.view, batch, x.data(), k, want.data(), n));
      for (const AmxGemvPrefetch pf : {AmxGemvPrefetch{.groups_ahead = 0, .l1_ahead = 0},
                                       AmxGemvPrefetch{.groups_ahead = 2, .l1_ahead = 0},
                                       AmxGemvPrefetch{.groups_ahead = 5, .l1_ahead = 1024}}) {
        set_amx_gemv_prefetch(pf);
        auto got = test::nan_vector(static_cast<size_t>(batch * n));
        fp8_gemv_amx(Fp8GemvParams::strided(w.view, batch, x.data(), k, got.data(), n));
        EXPECT_TRUE(same_bits(want.data(), got.data(), batch * n))
            << n << "x" << k << " batch " << batch << ": groups_ahead " << pf.groups_ahead << " l1_ahead "
            << pf.l1_ahead;
      }
    }
  }
  set_amx_gemv_prefetch(saved);
}

TEST(BatchInvariance, Fp8GemmRowDoesNotDependOnM) {
  std::mt19937_64 rng = test::make_rng();
  for (const GemmImpl impl : {GemmImpl::kAvx512Bf16, GemmImpl::kAmxBf16}) {
    if (!gemm_impl_supported(impl)) continue;
    const int64_t n = 256, k = 1024, rows = 45;
    test::RandomFp8Matrix w(n, k, rng);
    const auto x = test::random_bf16(static_cast<size_t>(rows * k), rng);
    std::vector<float> all(static_cast<size_t>(rows * n)), part(static_cast<size_t>(rows * n));
    fp8_gemm(impl, {w.view, x.data(), k, rows, all.data(), n, 0, n});
    for (const int64_t m : {1, 3, 8, 9, 17, 32}) {
      for (int64_t r0 = 0; r0 + m <= rows; r0 += m) {
        fp8_gemm(impl, {w.view, x.data() + r0 * k, k, m, part.data() + r0 * n, n, 0, n});
        for (int64_t r = r0; r < r0 + m; ++r)
          EXPECT_TRUE(same_bits(all.data() + r * n, part.data() + r * n, n))
              << gemm_impl_name(impl) << ": row " << r << " in a call of " << m << " vs " << rows;
      }
    }
  }
}

TEST(BatchInvariance, Bf16GemvRowDoesNotDependOnTheTokens) {
  std::mt19937_64 rng = test::make_rng();
  const int64_t rows = 300, cols = 7168;
  const auto w = test::random_bf16(static_cast<size_t>(rows * cols), rng);
  std::vector<float> x(static_cast<size_t>(8 * cols));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& v : x) v = d(rng);
  std::vector<float> alone(static_cast<size_t>(8 * rows)), batched(static_cast<size_t>(8 * rows));
  for (int t = 0; t < 8; ++t) bf16_gemv({w.data(), rows, cols, x.data() + t * cols, 1, alone.data() + t * rows, 0, rows});
  for (int tokens = 2; tokens <= 8; ++tokens) {
    bf16_gemv({w.data(), rows, cols, x.data(), tokens, batched.data(), 0, rows});
    for (int t = 0; t < tokens; ++t)
      EXPECT_TRUE(same_bits(alone.data() + t * rows, batched.data() + t * rows, rows))
          << "token " << t << " of " << tokens;
  }
}

}  // namespace
}  // namespace hymoe::kernels
