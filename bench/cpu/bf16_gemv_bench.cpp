// BF16 GEMV at the lm_head shape (DeepSeek-V3: 129280 x 7168 BF16, 1.85 GB read per decode
// token): records bf16_gemv_lm_head_129280x7168_b<T> at every thread count (batch 1) and at the
// largest with 1..4 tokens, and the AVX2 variant where it is not the best (..._b1_avx2, at 1 and
// at the most threads), each paired round by round with the read-bandwidth probe over the
// same bytes on the same threads (ratio = median of the per-round GEMV / probe ratios). Rows are
// split across workers as the engine's dense_linear splits them (one contiguous range each, in
// multiples of 16 rows).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "bench_context.h"
#include "hymoe/common/numeric.h"
#include "hymoe/kernels/bf16_gemv.h"
#include "hymoe/kernels/isa.h"

namespace hymoe::bench {
namespace {

constexpr int64_t kRows = 129280, kCols = 7168;
constexpr int kRounds = 7, kWarmupRounds = 2;

// The matrix, filled once per process (BF16 of uniform [-1, 1): never zeros).
HugeBuffer& lm_head(BenchContext& ctx) {
  return ctx.cached<HugeBuffer>("bf16_gemv", "lm_head", [] {
    auto* buf = new HugeBuffer(static_cast<size_t>(kRows * kCols) * 2);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<uint16_t> row(kCols);
    for (int64_t i = 0; i < kRows; ++i) {
      if (i < 64)
        for (auto& v : row) v = float_to_bf16(d(rng));
      else  // the first 64 rows' values rotated: distinct rows without 900 M generator calls
        std::rotate(row.begin(), row.begin() + 1 + i % 61, row.end());
      std::memcpy(buf->data() + i * kCols * 2, row.data(), kCols * 2);
    }
    return buf;
  });
}

void bm_bf16_gemv(benchmark::State& state, BenchContext* ctx, int threads, int tokens,
                  kernels::Isa isa) {
  HugeBuffer& w = lm_head(*ctx);
  cpu::ThreadPool& pool = ctx->pool(threads);
  const size_t bytes = w.size();
  PairedProbe& probe = PairedProbe::get(*ctx, bytes, threads);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * kCols));
  for (auto& v : x) v = d(rng);
  std::vector<float> y(static_cast<size_t>(tokens * kRows));
  const int64_t units = (kRows + 15) / 16, workers = pool.size();
  auto gemv_round = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](const cpu::WorkerInfo& wi) {
      kernels::Bf16GemvParams p;
      p.w = reinterpret_cast<const uint16_t*>(w.data());
      p.rows = kRows;
      p.cols = kCols;
      p.x = x.data();
      p.tokens = tokens;
      p.y = y.data();
      p.row_begin = units * wi.index / workers * 16;
      p.row_end = std::min<int64_t>(kRows, units * (wi.index + 1) / workers * 16);
      if (p.row_begin < p.row_end) kernels::bf16_gemv(isa, p);
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < kWarmupRounds; ++i) {
    probe.read_seconds(pool);
    gemv_round();
  }
  const PairedRounds r =
      paired_rounds(state, static_cast<double>(probe.bytes()), static_cast<double>(bytes),
                    [&] { return probe.read_seconds(pool); }, gemv_round);
  benchmark::DoNotOptimize(y.data());
  r.set_counters(state);
  const double gbps = median(r.gbps), ceiling = median(r.probe_gbps), ratio = median(r.ratios);
  const bool best = isa == kernels::best_isa();
  ctx->put({fmt::format("bf16_gemv_lm_head_{}x{}_b{}{}", kRows, kCols, tokens,
                        best ? std::string() : "_" + std::string(kernels::isa_name(isa))),
            threads, gbps, "GB/s", ceiling, ratio,
            fmt::format("{}, {} rounds probe/GEMV interleaved after {} warm-up pairs; value, ceiling = median GB/s, "
                        "ratio = median of per-round GEMV/probe (min {:.3f}, max {:.3f})",
                        kernels::isa_name(isa), r.ratios.size(), kWarmupRounds,
                        *std::min_element(r.ratios.begin(), r.ratios.end()),
                        *std::max_element(r.ratios.begin(), r.ratios.end()))});
}

}  // namespace

void register_bf16_gemv(BenchContext& ctx) {
  const kernels::Isa best = kernels::best_isa();
  for (int t : ctx.thread_counts()) {
    std::vector<int> token_counts{1};
    if (t == ctx.max_threads()) token_counts = {1, 2, 4};
    for (int tokens : token_counts) {
      const std::string name = fmt::format("bf16_gemv/lm_head/batch:{}/threads:{}", tokens, t);
      benchmark::RegisterBenchmark(name.c_str(), bm_bf16_gemv, &ctx, t, tokens, best)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(kRounds);
    }
  }
  if (best == kernels::Isa::kAvx2 || !kernels::isa_supported(kernels::Isa::kAvx2)) return;
  for (int t : {1, ctx.max_threads()}) {
    const std::string name = fmt::format("bf16_gemv/lm_head/avx2/batch:1/threads:{}", t);
    benchmark::RegisterBenchmark(name.c_str(), bm_bf16_gemv, &ctx, t, 1, kernels::Isa::kAvx2)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(kRounds);
    if (ctx.max_threads() == 1) break;
  }
}

}  // namespace hymoe::bench
