// Latency of one GEMV on one expert-shaped matrix at the full thread count: our FP8 GEMV against
// OpenBLAS sgemv (FP32 weights) and, where the library has it, sbgemv (BF16 weights). Each side
// cycles through distinct matrices so every call reads DRAM. FP8 and sgemv are measured
// interleaved (rounds of a block of FP8 calls then a block of sgemv calls): the ratio is formed
// per round and the median taken, so bandwidth drift of a shared machine between the two
// measurements does not enter it. Without OpenBLAS at configure time only our latency (against
// its floor: bytes / probe bandwidth) is recorded.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "bench_context.h"
#include "fp8_matrix_set.h"
#include "hymoe/common/numeric.h"
#include "hymoe/cpu/parallel_rows.h"
#include "hymoe/kernels/fp8_gemv.h"

#ifdef HYMOE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace hymoe::bench {

using kernels::Fp8MatrixView;

namespace {

struct Shape {
  int64_t rows, cols;
};

std::string shape_name(Shape s) { return std::to_string(s.rows) + "x" + std::to_string(s.cols); }

Fp8MatrixSet& fp8_set(BenchContext* ctx, Shape s) {
  return ctx->cached<Fp8MatrixSet>("gemv", shape_name(s), [&] {
    const size_t count = (ctx->streaming_bytes() + s.rows * s.cols - 1) / (s.rows * s.cols);
    return new Fp8MatrixSet(s.rows, s.cols, count, ctx->pool(ctx->max_threads()));
  });
}

// One FP8 GEMV call (batch 1) on one matrix over the whole pool; returns its seconds.
double fp8_call(cpu::ThreadPool& pool, const Fp8MatrixSet& set, const Fp8MatrixView& m, Shape s, const uint16_t* x,
                float* y) {
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](const cpu::WorkerInfo& w) {
    auto p = kernels::Fp8GemvParams::strided(m, 1, x, s.cols, y, s.rows);
    std::tie(p.row_begin, p.row_end) = set.row_range(w.index, pool.size());
    kernels::fp8_gemv(p);
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#ifndef HYMOE_HAVE_OPENBLAS
double fp8_latency_us(BenchContext* ctx, Shape s, benchmark::State* state) {
  Fp8MatrixSet& set = fp8_set(ctx, s);
  cpu::ThreadPool& pool = ctx->pool(ctx->max_threads());
  std::vector<uint16_t> x(static_cast<size_t>(s.cols), float_to_bf16(0.5f));
  std::vector<float> y(static_cast<size_t>(s.rows));
  double seconds = 0;
  int64_t n = 0;
  size_t next = 0;
  for (auto _ : *state) {
    const double dt = fp8_call(pool, set, set.matrices()[next++ % set.matrices().size()], s, x.data(), y.data());
    state->SetIterationTime(dt);
    seconds += dt;
    ++n;
  }
  return seconds / static_cast<double>(n) * 1e6;
}
#endif

double floor_us(BenchContext* ctx, Shape s) {
  return static_cast<double>(s.rows * s.cols) / (ctx->probe_gbps(ctx->max_threads()) * 1e9) * 1e6;
}

#ifndef HYMOE_HAVE_OPENBLAS
void bm_fp8_latency(benchmark::State& state, BenchContext* ctx, Shape s) {
  const double us = fp8_latency_us(ctx, s, &state);
  const double fl = floor_us(ctx, s);
  state.counters["us"] = us;
  ctx->put({"fp8_gemv_latency_" + shape_name(s), ctx->max_threads(), us, "us", fl, fl / us,
            "one matrix per call; ceiling = bytes / probe"});
}
#endif

#ifdef HYMOE_HAVE_OPENBLAS
// The same call with the rows cut by cpu::parallel_rows: each worker's static head, the rest of
// its share in pieces shared out as the workers finish (a slowed core's tail is run by the
// others).
double fp8_call_split(cpu::ThreadPool& pool, const Fp8MatrixView& m, Shape s, const uint16_t* x, float* y,
                      cpu::RowSplitShape shape) {
  const auto t0 = std::chrono::steady_clock::now();
  cpu::parallel_rows(
      pool, s.rows, 16,
      [&](int64_t b, int64_t e) {
        auto p = kernels::Fp8GemvParams::strided(m, 1, x, s.cols, y, s.rows);
        p.row_begin = b;
        p.row_end = e;
        kernels::fp8_gemv(p);
      },
      shape);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename T>
struct DenseSet {
  HugeBuffer buf;
  size_t count;
  size_t elems;
  DenseSet(size_t elems_, size_t count_) : buf(elems_ * count_ * sizeof(T)), count(count_), elems(elems_) {}
  T* matrix(size_t i) { return reinterpret_cast<T*>(buf.data()) + i * elems; }
};

template <typename T>
DenseSet<T>& dense_set(BenchContext* ctx, Shape s, bool bf16) {
  const size_t elems = static_cast<size_t>(s.rows * s.cols);
  const size_t count = (ctx->streaming_bytes() + elems * sizeof(T) - 1) / (elems * sizeof(T));
  return ctx->cached<DenseSet<T>>("openblas", shape_name(s) + (bf16 ? "bf16" : "f32"), [&] {
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
}

// FP8 GEMV and OpenBLAS sgemv (FP32) latency, interleaved: each Google Benchmark iteration is one
// round of kFp8Calls FP8 calls then kBlasCalls sgemv calls (distinct matrices, at least ~5 ms a
// side at 16 threads); per round, ratio = mean sgemv latency / mean FP8 latency. Records:
// fp8_gemv_latency_<shape> (median FP8 latency against bytes / probe) and openblas_sgemv_f32_<shape>
// (median sgemv latency, ceiling = median FP8 latency, ratio = median of the per-round ratios).
constexpr int kFp8Calls = 32, kBlasCalls = 8, kLatencyRounds = 9;

// Each round also runs a block of FP8 calls on a pool whose caller spins at most 5 us before it
// sleeps when it shares a worker's CPU (CallerWait::kAuto) instead of the default's up to 1 ms
// (kSpin), the two blocks in alternating order: records fp8_gemv_latency_<shape>_auto and
// openblas_sgemv_f32_<shape>_auto (ratio against the kAuto caller's latency). One run() per call
// (~150-250 us on the Xeon): a sleeping caller pays its wake-up per call.
// And two more blocks on the default pool with the rows cut by cpu::parallel_rows instead of one
// static range per worker: the last quarter of every worker's rows in 4 pieces shared out as the
// workers finish (records fp8_gemv_latency_<shape>_tail, openblas_sgemv_f32_<shape>_tail), and
// every share in 16 shared pieces (_dyn). The four blocks rotate their order from round to round.
void bm_fp8_vs_openblas(benchmark::State& state, BenchContext* ctx, Shape s) {
  Fp8MatrixSet& fp8 = fp8_set(ctx, s);
  DenseSet<float>& f32 = dense_set<float>(ctx, s, false);
  const int t = ctx->max_threads();
  cpu::ThreadPool& pool = ctx->pool(t);
  cpu::ThreadPool& auto_pool = ctx->pool(t, cpu::CallerWait::kAuto);
  openblas_set_num_threads(t);
  std::vector<uint16_t> xb(static_cast<size_t>(s.cols), float_to_bf16(0.5f));
  std::vector<float> xf(static_cast<size_t>(s.cols), 0.5f);
  std::vector<float> y(static_cast<size_t>(s.rows));
  size_t next_fp8 = 0, next_blas = 0;
  auto fp8_block = [&](cpu::ThreadPool& on) {
    double sec = 0;
    for (int i = 0; i < kFp8Calls; ++i)
      sec += fp8_call(on, fp8, fp8.matrices()[next_fp8++ % fp8.matrices().size()], s, xb.data(), y.data());
    return sec / kFp8Calls;
  };
  auto blas_block = [&] {
    double sec = 0;
    for (int i = 0; i < kBlasCalls; ++i) {
      const float* a = f32.matrix(next_blas++ % f32.count);
      const auto t0 = std::chrono::steady_clock::now();
      cblas_sgemv(CblasRowMajor, CblasNoTrans, s.rows, s.cols, 1.0f, a, s.cols, xf.data(), 1, 0.0f, y.data(), 1);
      sec += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return sec / kBlasCalls;
  };
  auto split_block = [&](cpu::RowSplitShape shape) {
    double sec = 0;
    for (int i = 0; i < kFp8Calls; ++i)
      sec += fp8_call_split(pool, fp8.matrices()[next_fp8++ % fp8.matrices().size()], s, xb.data(), y.data(),
                            shape);
    return sec / kFp8Calls;
  };
  const cpu::RowSplitShape tail_shape{}, dyn_shape{0, 16};
  fp8_block(pool);  // warm-up round
  fp8_block(auto_pool);
  split_block(tail_shape);
  split_block(dyn_shape);
  blas_block();
  std::vector<double> fp8_us, auto_us, blas_us, ratios, auto_ratios;
  std::vector<double> split_us[2], split_ratios[2];  // _tail, _dyn
  int round = 0;
  for (auto _ : state) {
    double a = 0, c = 0, d[2] = {0, 0};
    for (int k = 0; k < 4; ++k) {
      switch ((round + k) % 4) {
        case 0: a = fp8_block(pool); break;
        case 1: c = fp8_block(auto_pool); break;
        case 2: d[0] = split_block(tail_shape); break;
        default: d[1] = split_block(dyn_shape); break;
      }
    }
    ++round;
    const double b = blas_block();
    state.SetIterationTime(a * kFp8Calls);
    fp8_us.push_back(a * 1e6);
    auto_us.push_back(c * 1e6);
    blas_us.push_back(b * 1e6);
    ratios.push_back(b / a);
    auto_ratios.push_back(b / c);
    for (int v = 0; v < 2; ++v) {
      split_us[v].push_back(d[v] * 1e6);
      split_ratios[v].push_back(b / d[v]);
    }
  }
  benchmark::DoNotOptimize(y.data());
  const double ours = median(fp8_us), theirs = median(blas_us), ratio = median(ratios), fl = floor_us(ctx, s);
  state.counters["fp8_us"] = ours;
  state.counters["sgemv_us"] = theirs;
  state.counters["ratio"] = ratio;
  ctx->put({"fp8_gemv_latency_" + shape_name(s), t, ours, "us", fl, fl / ours,
            fmt::format("one matrix per call, median of {} rounds of {} calls interleaved with sgemv; ceiling = "
                        "bytes / probe", fp8_us.size(), kFp8Calls)});
  ctx->put({"openblas_sgemv_f32_" + shape_name(s), t, theirs, "us", ours, ratio,
            fmt::format("ratio = median over {} rounds of (sgemv / FP8 latency) (min {:.2f}, max {:.2f}); target >= 3.5; "
                        "FP8 caller spins <= {} us",
                        ratios.size(), *std::min_element(ratios.begin(), ratios.end()),
                        *std::max_element(ratios.begin(), ratios.end()), pool.caller_spin_limit_us())});
  const double auto_wait = median(auto_us);
  ctx->put({"fp8_gemv_latency_" + shape_name(s) + "_auto", t, auto_wait, "us", fl, fl / auto_wait,
            fmt::format("as fp8_gemv_latency_{} in the same rounds, run()'s caller kAuto (spins <= {} us); min {:.1f}, "
                        "max {:.1f} us", shape_name(s), auto_pool.caller_spin_limit_us(),
                        *std::min_element(auto_us.begin(), auto_us.end()), *std::max_element(auto_us.begin(), auto_us.end()))});
  ctx->put({"openblas_sgemv_f32_" + shape_name(s) + "_auto", t, theirs, "us", auto_wait, median(auto_ratios),
            fmt::format("ratio = median over {} rounds of (sgemv / FP8 latency, caller kAuto) (min {:.2f}, max {:.2f})",
                        auto_ratios.size(), *std::min_element(auto_ratios.begin(), auto_ratios.end()),
                        *std::max_element(auto_ratios.begin(), auto_ratios.end()))});
  const char* split_names[2] = {"_tail", "_dyn"};
  const char* split_notes[2] = {"each worker's last quarter in 4 pieces shared out", "every share in 16 shared pieces"};
  for (int v = 0; v < 2; ++v) {
    const std::vector<double>& us = split_us[v];
    const std::vector<double>& r = split_ratios[v];
    const double split = median(us);
    ctx->put({"fp8_gemv_latency_" + shape_name(s) + split_names[v], t, split, "us", fl, fl / split,
              fmt::format("as fp8_gemv_latency_{} in the same rounds, the rows cut by cpu::parallel_rows ({}); min "
                          "{:.1f}, max {:.1f} us",
                          shape_name(s), split_notes[v], *std::min_element(us.begin(), us.end()),
                          *std::max_element(us.begin(), us.end()))});
    ctx->put({"openblas_sgemv_f32_" + shape_name(s) + split_names[v], t, theirs, "us", split, median(r),
              fmt::format("ratio = median over {} rounds of (sgemv / FP8 latency, rows by cpu::parallel_rows, {}) (min "
                          "{:.2f}, max {:.2f})",
                          r.size(), split_notes[v], *std::min_element(r.begin(), r.end()),
                          *std::max_element(r.begin(), r.end()))});
  }
}

template <typename T>
void bm_openblas(benchmark::State& state, BenchContext* ctx, Shape s, bool bf16) {
  auto& set = dense_set<T>(ctx, s, bf16);
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
#ifdef HYMOE_HAVE_OPENBLAS
    benchmark::RegisterBenchmark(("fp8_vs_openblas_sgemv_f32/" + shape_name(s)).c_str(), bm_fp8_vs_openblas, &ctx, s)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(kLatencyRounds);
#ifdef HYMOE_HAVE_SBGEMV
    benchmark::RegisterBenchmark(("openblas_sbgemv_bf16/" + shape_name(s)).c_str(),
                                 bm_openblas<uint16_t>, &ctx, s, true)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.5);
#endif
#else
    benchmark::RegisterBenchmark(("fp8_gemv_latency/" + shape_name(s)).c_str(), bm_fp8_latency,
                                 &ctx, s)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.5);
#endif
  }
}

}  // namespace hymoe::bench
