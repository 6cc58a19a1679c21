// Latency of one GEMV on one expert-shaped matrix at the full thread count: our FP8 GEMV against
// OpenBLAS sgemv (FP32 weights) and, where the library has it, sbgemv (BF16 weights). Each side
// cycles through distinct matrices so every call reads DRAM. Without OpenBLAS at configure time
// only our latency (against its floor: bytes / probe bandwidth) is recorded.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>

#include "bench_context.h"
#include "fp8_matrix_set.h"
#include "hymoe/common/numeric.h"
#include "hymoe/kernels/fp8_gemv.h"

#ifdef HYMOE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace hymoe::bench {
namespace {

struct Shape {
  int64_t rows, cols;
};

std::string shape_name(Shape s) { return std::to_string(s.rows) + "x" + std::to_string(s.cols); }

double fp8_latency_us(BenchContext* ctx, Shape s, benchmark::State* state) {
  Fp8MatrixSet& set = ctx->cached<Fp8MatrixSet>("gemv", shape_name(s), [&] {
    const size_t count = (ctx->streaming_bytes() + s.rows * s.cols - 1) / (s.rows * s.cols);
    return new Fp8MatrixSet(s.rows, s.cols, count, ctx->pool(ctx->max_threads()));
  });
  cpu::ThreadPool& pool = ctx->pool(ctx->max_threads());
  std::vector<uint16_t> x(static_cast<size_t>(s.cols), float_to_bf16(0.5f));
  std::vector<float> y(static_cast<size_t>(s.rows));
  double seconds = 0;
  int64_t n = 0;
  size_t next = 0;
  for (auto _ : *state) {
    const Fp8Matrix& m = set.matrices()[next++ % set.matrices().size()];
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](const cpu::WorkerInfo& w) {
      auto p = kernels::Fp8GemvParams::strided(m, 1, x.data(), s.cols, y.data(), s.rows);
      std::tie(p.row_begin, p.row_end) = set.row_range(w.index, pool.size());
      kernels::fp8_gemv(p);
    });
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state->SetIterationTime(dt);
    seconds += dt;
    ++n;
  }
  return seconds / static_cast<double>(n) * 1e6;
}

void bm_fp8_latency(benchmark::State& state, BenchContext* ctx, Shape s) {
  const double us = fp8_latency_us(ctx, s, &state);
  const int t = ctx->max_threads();
  const double floor_us = static_cast<double>(s.rows * s.cols) / (ctx->probe_gbps(t) * 1e9) * 1e6;
  state.counters["us"] = us;
  ctx->put({"fp8_gemv_latency_" + shape_name(s), t, us, "us", floor_us, floor_us / us,
            "one matrix per call; ceiling = bytes / probe"});
}

#ifdef HYMOE_HAVE_OPENBLAS
template <typename T>
struct DenseSet {
  HugeBuffer buf;
  size_t count;
  size_t elems;
  DenseSet(size_t elems_, size_t count_) : buf(elems_ * count_ * sizeof(T)), count(count_), elems(elems_) {}
  T* matrix(size_t i) { return reinterpret_cast<T*>(buf.data()) + i * elems; }
};

template <typename T>
void bm_openblas(benchmark::State& state, BenchContext* ctx, Shape s, bool bf16) {
  const size_t elems = static_cast<size_t>(s.rows * s.cols);
  const size_t count = (ctx->streaming_bytes() + elems * sizeof(T) - 1) / (elems * sizeof(T));
  auto& set = ctx->cached<DenseSet<T>>("openblas", shape_name(s) + (bf16 ? "bf16" : "f32"), [&] {
    ctx->drop("gemv");
    ctx->drop("paired_probe");
    auto* d = new DenseSet<T>(elems, count);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-0.01f, 0.01f);
    for (size_t i = 0; i < elems; ++i) {  // one random matrix, copied: values do not matter
      const float v = dist(rng);
      if constexpr (sizeof(T) == 4) d->matrix(0)[i] = v;
      else d->matrix(0)[i] = float_to_bf16(v);
    }
    for (size_t m = 1; m < count; ++m) std::copy(d->matrix(0), d->matrix(0) + elems, d->matrix(m));
    return d;
  });
  const int t = ctx->max_threads();
  openblas_set_num_threads(t);
  std::vector<T> x(static_cast<size_t>(s.cols));
  for (auto& v : x) {
    if constexpr (sizeof(T) == 4) v = 0.5f;
    else v = float_to_bf16(0.5f);
  }
  std::vector<float> y(static_cast<size_t>(s.rows));
  double seconds = 0;
  int64_t n = 0;
  size_t next = 0;
  for (auto _ : state) {
    T* a = set.matrix(next++ % set.count);
    const auto t0 = std::chrono::steady_clock::now();
    if constexpr (sizeof(T) == 4) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, s.rows, s.cols, 1.0f, a, s.cols, x.data(), 1, 0.0f,
                  y.data(), 1);
    } else {
#ifdef HYMOE_HAVE_SBGEMV
      cblas_sbgemv(CblasRowMajor, CblasNoTrans, s.rows, s.cols, 1.0f,
                   reinterpret_cast<const bfloat16*>(a), s.cols,
                   reinterpret_cast<const bfloat16*>(x.data()), 1, 0.0f, y.data(), 1);
#endif
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
    ++n;
  }
  benchmark::DoNotOptimize(y.data());
  const double us = seconds / static_cast<double>(n) * 1e6;
  // Our latency on the same shape, measured just before in the same process.
  double ours = 0;
  for (const Record& r : ctx->records())
    if (r.name == "fp8_gemv_latency_" + shape_name(s)) ours = r.value;
  state.counters["us"] = us;
  ctx->put({std::string(bf16 ? "openblas_sbgemv_bf16_" : "openblas_sgemv_f32_") + shape_name(s), t,
            us, "us", ours, ours > 0 ? us / ours : 0,
            "ratio = OpenBLAS latency / FP8 GEMV latency (target >= 3.5 for FP32)"});
}
#endif

}  // namespace

void register_openblas(BenchContext& ctx) {
  for (Shape s : {Shape{2048, 7168}, Shape{7168, 2048}}) {
    benchmark::RegisterBenchmark(("fp8_gemv_latency/" + shape_name(s)).c_str(), bm_fp8_latency,
                                 &ctx, s)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.5);
#ifdef HYMOE_HAVE_OPENBLAS
    benchmark::RegisterBenchmark(("openblas_sgemv_f32/" + shape_name(s)).c_str(),
                                 bm_openblas<float>, &ctx, s, false)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.5);
#ifdef HYMOE_HAVE_SBGEMV
    benchmark::RegisterBenchmark(("openblas_sbgemv_bf16/" + shape_name(s)).c_str(),
                                 bm_openblas<uint16_t>, &ctx, s, true)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.5);
#endif
#endif
  }
}

}  // namespace hymoe::bench
