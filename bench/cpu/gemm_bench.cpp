// CPU prefill GEMM: TFLOP/s of the FP8 GEMM for 512..4096 tokens at the gate/up shape
// (X [M, 7168] x W^T, W 2048 x 7168), each implementation against its compute ceiling measured
// in the same run on the same threads (a register-only vdpbf16ps or tdpbf16ps loop).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <chrono>
#include <random>

#include "bench_context.h"
#include "fp8_matrix_set.h"
#include "hymoe/common/numeric.h"
#include "hymoe/kernels/fp8_gemm.h"

namespace hymoe::bench {
namespace {

constexpr int64_t kN = 2048, kK = 7168;
constexpr int64_t kPeakIters = 1 << 19;

// 24 independent vdpbf16ps chains: 24 x 64 flops per step (unrolled so they stay in registers).
// The multiplicands come from six registers in varying pairs, as in a real micro-kernel: on Zen 5
// a loop where every instruction reads the same one or two registers issued 4x faster (0.93 vs
// 0.235 TFLOP/s per core), a rate no GEMM can reach.
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_peak_flops(int64_t iters) {
  __m512 acc[24];
#pragma GCC unroll 24
  for (int j = 0; j < 24; ++j) acc[j] = _mm512_setzero_ps();
  __m512bh v[6];
  for (int j = 0; j < 6; ++j) v[j] = (__m512bh)_mm512_set1_epi32(0x3F803F80 - j * 0x00100010);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < 24; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], v[j % 6], v[(j / 6 + 1) % 6]);
  }
  __m512 t = acc[0];
#pragma GCC unroll 24
  for (int j = 1; j < 24; ++j) t = _mm512_add_ps(t, acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, t);
  benchmark::DoNotOptimize(lanes[0]);
  return static_cast<double>(iters) * 24 * 64;
}

double peak_tflops(BenchContext* ctx, kernels::GemmImpl impl) {
  cpu::ThreadPool& pool = ctx->pool(ctx->max_threads());
  const int64_t iters = impl == kernels::GemmImpl::kAmxBf16 ? kPeakIters / 16 : kPeakIters;
  std::vector<double> flops(pool.size());
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](const cpu::WorkerInfo& w) {
    flops[w.index] = impl == kernels::GemmImpl::kAmxBf16 ? kernels::amx_peak_loop_flops(iters)
                                                          : dpbf16_peak_flops(iters);
  });
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / dt / 1e12;
}

void bm_gemm(benchmark::State& state, BenchContext* ctx, kernels::GemmImpl impl, int64_t m) {
  cpu::ThreadPool& pool = ctx->pool(ctx->max_threads());
  Fp8MatrixSet& w = ctx->cached<Fp8MatrixSet>("gemm_w", "w", [&] {
    return new Fp8MatrixSet(kN, kK, 1, pool);
  });
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(m * kK));
  for (auto& v : x) v = float_to_bf16(d(rng));
  std::vector<float> c(static_cast<size_t>(m * kN));
  double seconds = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](const cpu::WorkerInfo& wi) {
      const int64_t panels = kN / 32;
      kernels::Fp8GemmParams p{w.matrices()[0], x.data(), kK, m, c.data(), kN,
                               panels * wi.index / pool.size() * 32,
                               panels * (wi.index + 1) / pool.size() * 32};
      kernels::fp8_gemm(impl, p);
    });
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
    ++n;
  }
  const double tflops = 2.0 * m * kN * kK * static_cast<double>(n) / seconds / 1e12;
  const double peak = ctx->cached<double>("gemm_peak", kernels::gemm_impl_name(impl),
                                          [&] { return new double(peak_tflops(ctx, impl)); });
  state.counters["TFLOPs"] = tflops;
  ctx->put({std::string("fp8_gemm_") + kernels::gemm_impl_name(impl) + "_m" + std::to_string(m),
            pool.size(), tflops, "TFLOP/s", peak, tflops / peak,
            "W 2048x7168 FP8; ceiling = register-only dot-product loop"});
}

}  // namespace

double dpbf16_peak_tflops(BenchContext& ctx) {
  if (!kernels::gemm_impl_supported(kernels::GemmImpl::kAvx512Bf16)) return 0.0;
  return ctx.cached<double>("gemm_peak", kernels::gemm_impl_name(kernels::GemmImpl::kAvx512Bf16),
                            [&] { return new double(peak_tflops(&ctx, kernels::GemmImpl::kAvx512Bf16)); });
}

void register_gemm(BenchContext& ctx) {
  for (kernels::GemmImpl impl : {kernels::GemmImpl::kAvx512Bf16, kernels::GemmImpl::kAmxBf16}) {
    if (!kernels::gemm_impl_supported(impl)) continue;
    for (int64_t m : {512, 1024, 2048, 4096}) {
      benchmark::RegisterBenchmark(
          (std::string("fp8_gemm/") + kernels::gemm_impl_name(impl) + "/m:" + std::to_string(m)).c_str(),
          bm_gemm, &ctx, impl, m)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
    }
  }
}

}  // namespace hymoe::bench
