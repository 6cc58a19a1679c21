// The cost of one ThreadPool::run() (a global synchronisation: every GEMV call, two per MoE
// layer): a job of 100 us of busy work on every worker, back to back. Value: us per run();
// ceiling: the 100 us of work; ratio = work / run() (1 = no overhead). Measured at every thread
// count, so the full-machine pool (the caller shares a core with a worker) is covered.
#include <benchmark/benchmark.h>

#include <chrono>

#include "bench_context.h"

namespace hymoe::bench {
namespace {

constexpr double kWorkUs = 100;

void bm_pool_run(benchmark::State& state, BenchContext* ctx, int threads) {
  cpu::ThreadPool& pool = ctx->pool(threads);
  auto job = [](const cpu::WorkerInfo&) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(kWorkUs);
    while (std::chrono::steady_clock::now() < end) {
    }
  };
  pool.run(job);
  double seconds = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(job);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
    ++n;
  }
  const double us = seconds / static_cast<double>(n) * 1e6;
  state.counters["us"] = us;
  ctx->put({"thread_pool_run_100us_job", threads, us, "us", kWorkUs, kWorkUs / us,
            "one run() of 100 us busy work per worker; ratio = 100 us / run() time"});
}

}  // namespace

void register_pool(BenchContext& ctx) {
  for (int t : ctx.thread_counts()) {
    benchmark::RegisterBenchmark(("thread_pool_run/threads:" + std::to_string(t)).c_str(), bm_pool_run, &ctx, t)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.2);
  }
}

}  // namespace hymoe::bench
