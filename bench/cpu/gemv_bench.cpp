// FP8 GEMV at the DeepSeek-V3 expert shapes (gate/up 2048x7168, down 7168x2048): GB/s of weights
// read against the read probe on the same pool, measured interleaved with it (probe, GEMV, probe,
// GEMV, ...; see bm_gemv). Enough distinct matrices to exceed the L3 several times; each round runs
// every matrix once, each thread its share of rows.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>

#include "bench_context.h"
#include "fp8_matrix_set.h"
#include "hymoe/common/numeric.h"
#include "hymoe/kernels/fp8_special_codes.h"
#include "hymoe/cpu/parallel_rows.h"
#include "hymoe/kernels/fp8_gemv.h"

namespace hymoe::bench {

using kernels::Fp8MatrixView;

Fp8MatrixSet::Fp8MatrixSet(int64_t rows, int64_t cols, size_t count, cpu::ThreadPool& pool)
    : rows_(rows), cols_(cols), buf_(static_cast<size_t>(rows * cols) * count) {
  Fp8MatrixView proto;
  proto.rows = rows;
  proto.cols = cols;
  scales_.resize(static_cast<size_t>(proto.scale_rows() * proto.scale_cols()) * count);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> d(1e-3f, 4e-3f);
  for (float& s : scales_) s = d(rng);
  for (size_t i = 0; i < count; ++i) {
    Fp8MatrixView m = proto;
    m.data = reinterpret_cast<const uint8_t*>(buf_.data()) + i * rows * cols;
    m.scale_inv = scales_.data() + i * proto.scale_rows() * proto.scale_cols();
    mats_.push_back(m);
  }
  // First touch: each worker writes the rows it will read.
  pool.run([&](const cpu::WorkerInfo& w) {
    const auto [r0, r1] = row_range(w.index, pool.size());
    for (size_t i = 0; i < count; ++i) {
      std::byte* p = buf_.data() + i * rows * cols + r0 * cols;
      fill_random_fp8(p, static_cast<size_t>((r1 - r0) * cols), i * 1000 + w.index);
    }
  });
}

std::pair<int64_t, int64_t> Fp8MatrixSet::row_range(int worker, int workers) const {
  auto at = [&](int i) { return (rows_ * i / workers + 15) / 16 * 16; };
  return {std::min(rows_, at(worker)), worker + 1 == workers ? rows_ : std::min(rows_, at(worker + 1))};
}

namespace {

struct Shape {
  int64_t rows, cols;
};

// Probe/GEMV pairs per DRAM-streaming GEMV case (one pair: 2 x 1-2 GB read).
constexpr int kPairedRounds = 7;

Fp8MatrixSet& matrices(BenchContext* ctx, Shape s) {
  const std::string key = std::to_string(s.rows) + "x" + std::to_string(s.cols);
  return ctx->cached<Fp8MatrixSet>("gemv", key, [&] {
    ctx->drop("probe");
    ctx->drop("gemv_shifts");  // (its matrices point into the set being replaced)
    const size_t count = (ctx->streaming_bytes() + s.rows * s.cols - 1) / (s.rows * s.cols);
    return new Fp8MatrixSet(s.rows, s.cols, count, ctx->pool(ctx->max_threads()));
  });
}

// The same matrices with their special codes attached (the GEMV's shift decode), found once.
struct ShiftMatrices {
  std::vector<Fp8SpecialCodes> specials;
  std::vector<Fp8MatrixView> mats;
};
const std::vector<Fp8MatrixView>& shift_matrices(BenchContext* ctx, Shape s) {
  Fp8MatrixSet& set = matrices(ctx, s);
  const std::string key = std::to_string(s.rows) + "x" + std::to_string(s.cols);
  return ctx->cached<ShiftMatrices>("gemv_shifts", key, [&] {
    auto* m = new ShiftMatrices;
    m->mats = set.matrices();
    for (const Fp8MatrixView& w : m->mats) m->specials.push_back(kernels::find_fp8_special_codes(w));
    for (size_t i = 0; i < m->mats.size(); ++i) m->mats[i].specials = &m->specials[i];
    return m;
  }).mats;
}

// GEMV over every matrix of the set (each thread its rows), paired with the read probe on the
// same pool: each Google Benchmark iteration is one round, probe then GEMV, both reading the same
// number of bytes from DRAM (distinct matrices, >= 4x the L3 each). On a shared machine the
// bandwidth drifts between seconds; a pair measured back to back sees the same conditions, so the
// ratio is formed per round (GEMV GB/s / probe GB/s of that round) and the record holds the
// median of those ratios, with the median GEMV and median probe GB/s as value and ceiling.
// A software-prefetch variant of the AVX512-BF16 GEMV, measured beside the default so that one
// bench-cpu run on a machine shows which setting suits it.
struct PrefetchVariant {
  const char* name;
  kernels::GemvPrefetch setting;
};
struct AmxPrefetchVariant {
  const char* name;
  kernels::AmxGemvPrefetch setting;
};

// The core's speed at this moment: worker 0 of the pool runs the 1-thread GEMV over one 64x7168
// matrix held in its L2 (as fp8_gemv_l2_64x7168_b1) for ~2 ms; GB/s. A case's note carries it
// from before and after its rounds, so that a shared host that slows the cores in part of a run
// (the Xeon once measured 9.0 GB/s at a run's start against 15.8 the run before) shows in the
// case it hit.
double core_l2_gbps(BenchContext* ctx, cpu::ThreadPool& pool) {
  Fp8MatrixSet& m = ctx->cached<Fp8MatrixSet>("core_check", "64x7168", [&] { return new Fp8MatrixSet(64, 7168, 1, pool); });
  std::vector<uint16_t> x(7168, float_to_bf16(0.25f));
  std::vector<float> y(64);
  auto p = kernels::Fp8GemvParams::strided(m.matrices()[0], 1, x.data(), 7168, y.data(), 64);
  constexpr int kCalls = 64;
  double seconds = 0;
  pool.run([&](const cpu::WorkerInfo& w) {
    if (w.index != 0) return;
    for (int i = 0; i < 4; ++i) kernels::fp8_gemv(p);  // into L2
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) kernels::fp8_gemv(p);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  benchmark::DoNotOptimize(y.data());
  return kCalls * 64.0 * 7168.0 / seconds / 1e9;
}

// Warm-up pairs (probe round, GEMV round) before every case's measured rounds: the first wakes
// the pool's workers (asleep since the pool's last case) and faults in whatever is untouched; the
// second runs with both already warm, so the first measured round pays nothing the later ones
// do not, whatever case came before.
constexpr int kWarmupPairs = 2;

// wait: how run()'s caller waits (the pool's default, as the engine runs; kAuto for the
// comparison records, suffix _auto). shared_tail (records fp8_gemv_<shape>_b1_tail): each
// worker runs the head of cpu::RowSplit's share of every matrix (the first three quarters of
// about its static rows), then the workers take the tail pieces of all matrices from one counter
// as they finish: a core the host slowed leaves its tails to the others.
// shifts (records fp8_gemv_<shape>_b<batch>_shifts): the matrices with their special codes, so
// the AVX512-BF16 GEMV decodes by shifts.
// One paired GEMV case of bm_gemv (the fields as above; each defaults to the plain case).
struct GemvCase {
  Shape s;
  int threads;
  int batch = 1;
  const PrefetchVariant* variant = nullptr;
  cpu::CallerWait wait = kDefaultCallerWait;
  bool amx = false;
  const AmxPrefetchVariant* amx_variant = nullptr;
  bool shared_tail = false;
  bool shifts = false;
};
void bm_gemv(benchmark::State& state, BenchContext* ctx, GemvCase c) {
  const Shape s = c.s;
  const int threads = c.threads, batch = c.batch;
  const PrefetchVariant* variant = c.variant;
  const cpu::CallerWait wait = c.wait;
  const bool amx = c.amx, shared_tail = c.shared_tail, shifts = c.shifts;
  const AmxPrefetchVariant* amx_variant = c.amx_variant;
  const kernels::GemvPrefetch saved = kernels::gemv_prefetch();
  const kernels::AmxGemvPrefetch amx_saved = kernels::amx_gemv_prefetch();
  if (variant) kernels::set_gemv_prefetch(variant->setting);
  if (amx_variant) kernels::set_amx_gemv_prefetch(amx_variant->setting);
  Fp8MatrixSet& set = matrices(ctx, s);
  const std::vector<Fp8MatrixView>& mats = shifts ? shift_matrices(ctx, s) : set.matrices();
  cpu::ThreadPool& pool = ctx->pool(threads, wait);
  const size_t gemv_bytes = set.matrices().size() * static_cast<size_t>(s.rows * s.cols);
  PairedProbe& probe = PairedProbe::get(*ctx, gemv_bytes, threads);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(batch * s.cols));
  for (auto& v : x) v = float_to_bf16(d(rng));
  std::vector<float> y(static_cast<size_t>(batch * s.rows));
  // (shared_tail: the probe rounds split their bytes the same way, PairedProbe::read_split_seconds)
  auto probe_round = [&] { return shared_tail ? probe.read_split_seconds(pool) : probe.read_seconds(pool); };
  auto gemv = [&](const Fp8MatrixView& m, int64_t r0, int64_t r1) {
    auto p = kernels::Fp8GemvParams::strided(m, batch, x.data(), s.cols, y.data(), s.rows);
    p.row_begin = r0;
    p.row_end = r1;
    if (amx) kernels::fp8_gemv_amx(p);
    else kernels::fp8_gemv(p);
  };
  const cpu::RowSplit split(s.rows, 16, pool.size());
  const int tail_pieces = split.pieces() * static_cast<int>(mats.size());
  alignas(64) std::atomic<int> next_piece{0};
  auto gemv_round = [&] {
    next_piece.store(0, std::memory_order_relaxed);
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](const cpu::WorkerInfo& w) {
      if (!shared_tail) {
        const auto [r0, r1] = set.row_range(w.index, pool.size());
        for (const Fp8MatrixView& m : mats) gemv(m, r0, r1);
        return;
      }
      const cpu::RowRange h = split.head(w.index);
      if (!h.empty())
        for (const Fp8MatrixView& m : mats) gemv(m, h.begin, h.end);
      for (int p = next_piece.fetch_add(1, std::memory_order_relaxed); p < tail_pieces;
           p = next_piece.fetch_add(1, std::memory_order_relaxed)) {
        const cpu::RowRange r = split.piece(p % split.pieces());
        if (!r.empty()) gemv(mats[static_cast<size_t>(p / split.pieces())], r.begin, r.end);
      }
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < kWarmupPairs; ++i) {
    probe_round();
    gemv_round();
  }
  const double core_before = core_l2_gbps(ctx, pool);
  const PairedRounds rounds = paired_rounds(state, static_cast<double>(probe.bytes()),
                                            static_cast<double>(gemv_bytes), probe_round, gemv_round);
  const std::vector<double>& ratios = rounds.ratios;
  benchmark::DoNotOptimize(y.data());
  const double core_after = core_l2_gbps(ctx, pool);
  const double gbps = median(rounds.gbps), ceiling = median(rounds.probe_gbps), ratio = median(ratios);
  const double best_gemv = *std::max_element(rounds.gbps.begin(), rounds.gbps.end());
  const double best_probe = *std::max_element(rounds.probe_gbps.begin(), rounds.probe_gbps.end());
  rounds.set_counters(state);
  state.counters["best_ratio"] = best_gemv / best_probe;
  kernels::set_gemv_prefetch(saved);
  kernels::set_amx_gemv_prefetch(amx_saved);
  ctx->put({"fp8_gemv_" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_b" + std::to_string(batch) +
                    (variant ? std::string("_pf_") + variant->name : std::string()) +
                    (wait == kDefaultCallerWait ? "" : std::string("_") + caller_wait_name(wait)) + (amx ? "_amx" : "") +
                    (amx_variant ? std::string("_pf_") + amx_variant->name : std::string()) +
                    (shared_tail ? "_tail" : "") + (shifts ? "_shifts" : ""),
            threads, gbps, "GB/s", ceiling, ratio,
            fmt::format("{}{}, {} matrices, {} warm-up pairs, {} rounds probe/GEMV interleaved{}; value, ceiling = "
                        "median GB/s, ratio = median of per-round GEMV/probe (min {:.3f}, max {:.3f}); best GEMV {:.2f} / "
                        "best probe {:.2f} = {:.3f}; core L2 decode before/after {:.2f} / {:.2f} GB/s; caller spins <= {} us",
                        amx ? std::string_view("amx") : kernels::isa_name(kernels::best_isa()),
                        shifts ? " shift decode" : "", set.matrices().size(), kWarmupPairs, ratios.size(),
                        shared_tail ? " (the probe's tails shared out as the GEMV's)" : "",
                        *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()),
                        best_gemv, best_probe, best_gemv / best_probe, core_before, core_after,
                        pool.caller_spin_limit_us())});
}

// The batch-1 GEMV paired with the probe matrix by matrix instead of round by round (records
// fp8_gemv_<shape>_b1_fine): each round alternates a probe piece (1 / count of every worker's
// slice) and one matrix's GEMV (every worker its rows), count times, each its own run(); the
// round's ratio is the GEMV's GB/s over the probe's, both summed over the round. A shared host's
// bandwidth moved by up to 2x between cases and round ratios spanned 0.58-1.00 inside one case
// (the 16-core Xeon), i.e. it drifts within the 15-150 ms a whole round takes; alternating every
// 0.1-1.5 ms puts both sides in the same moments. Each matrix is its own run() (a barrier
// after it) on both sides, so the two pay the same dispatch.
void bm_gemv_fine(benchmark::State& state, BenchContext* ctx, Shape s, int threads) {
  Fp8MatrixSet& set = matrices(ctx, s);
  cpu::ThreadPool& pool = ctx->pool(threads, kDefaultCallerWait);
  const int count = static_cast<int>(set.matrices().size());
  const size_t matrix_bytes = static_cast<size_t>(s.rows * s.cols);
  PairedProbe& probe = PairedProbe::get(*ctx, count * matrix_bytes, threads);
  const size_t piece_bytes = probe.part_bytes(pool, count);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(s.cols));
  for (auto& v : x) v = float_to_bf16(d(rng));
  std::vector<float> y(static_cast<size_t>(s.rows));
  auto gemv_seconds = [&](const Fp8MatrixView& m) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](const cpu::WorkerInfo& w) {
      const auto [r0, r1] = set.row_range(w.index, pool.size());
      auto p = kernels::Fp8GemvParams::strided(m, 1, x.data(), s.cols, y.data(), s.rows);
      p.row_begin = r0;
      p.row_end = r1;
      kernels::fp8_gemv(p);
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto round = [&](double& tp, double& tg) {
    tp = tg = 0;
    for (int i = 0; i < count; ++i) {
      tp += probe.read_part_seconds(pool, i, count);
      tg += gemv_seconds(set.matrices()[i]);
    }
  };
  double tp = 0, tg = 0;
  for (int i = 0; i < kWarmupPairs; ++i) round(tp, tg);
  std::vector<double> gemv_gbps, probe_gbps, ratios;
  for (auto _ : state) {
    round(tp, tg);
    state.SetIterationTime(tg);
    probe_gbps.push_back(static_cast<double>(piece_bytes) * count / tp / 1e9);
    gemv_gbps.push_back(static_cast<double>(matrix_bytes) * count / tg / 1e9);
    ratios.push_back(gemv_gbps.back() / probe_gbps.back());
  }
  benchmark::DoNotOptimize(y.data());
  const double gbps = median(gemv_gbps), ceiling = median(probe_gbps), ratio = median(ratios);
  state.counters["GBps"] = gbps;
  state.counters["probe"] = ceiling;
  state.counters["of_probe"] = ratio;
  ctx->put({"fp8_gemv_" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_b1_fine", threads, gbps, "GB/s",
            ceiling, ratio,
            fmt::format("{}, {} matrices, probe and GEMV alternating matrix by matrix ({} MB probe pieces), {} "
                        "warm-up rounds, {} rounds; value, ceiling = median GB/s, ratio = median of per-round "
                        "GEMV/probe (min {:.3f}, max {:.3f})",
                        kernels::isa_name(kernels::best_isa()), count, piece_bytes >> 20, kWarmupPairs,
                        ratios.size(), *std::min_element(ratios.begin(), ratios.end()),
                        *std::max_element(ratios.begin(), ratios.end()))});
}

// One core's decode-and-dot speed with the weights resident in its L2 (one ~450 KB matrix,
// called over and over): what the core could consume if DRAM kept up. The ratio to the 1-thread
// probe is the headroom: below 1, a core cannot saturate even its own read bandwidth.
// shifts: the matrix with its special codes (the AVX512-BF16 variant's shift decode), records
// fp8_gemv_l2_<shape>_b<B>_shifts.
void bm_gemv_l2(benchmark::State& state, BenchContext* ctx, Shape s, int batch, kernels::Isa isa, bool amx,
                bool shifts) {
  Fp8MatrixSet& set = ctx->cached<Fp8MatrixSet>("gemv_l2", std::to_string(s.rows) + "x" + std::to_string(s.cols),
                                                [&] { return new Fp8MatrixSet(s.rows, s.cols, 1, ctx->pool(1)); });
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(batch * s.cols));
  for (auto& v : x) v = float_to_bf16(d(rng));
  std::vector<float> y(static_cast<size_t>(batch * s.rows));
  auto p = kernels::Fp8GemvParams::strided(set.matrices()[0], batch, x.data(), s.cols, y.data(), s.rows);
  const Fp8SpecialCodes specials = shifts ? kernels::find_fp8_special_codes(p.w) : Fp8SpecialCodes{};
  if (shifts) p.w.specials = &specials;
  constexpr int kCalls = 64;
  auto call = [&] {
    if (amx) kernels::fp8_gemv_amx(p);
    else kernels::fp8_gemv(isa, p);
  };
  for (int i = 0; i < 4; ++i) call();  // into L2
  double bytes = 0, seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) call();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    bytes += static_cast<double>(kCalls) * s.rows * s.cols;
    seconds += dt;
  }
  benchmark::DoNotOptimize(y.data());
  const double gbps = bytes / seconds / 1e9, probe = ctx->probe_gbps(1);
  state.counters["GBps"] = gbps;
  const std::string suffix = amx                            ? "_amx"
                             : shifts                       ? "_shifts"
                             : isa == kernels::best_isa() ? ""
                                                            : "_" + std::string(kernels::isa_name(isa));
  ctx->put({"fp8_gemv_l2_" + std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_b" + std::to_string(batch) + suffix,
            1, gbps, "GB/s", probe, probe > 0 ? gbps / probe : 0,
            std::string(amx ? "amx" : kernels::isa_name(isa)) + (shifts ? " shift decode" : "") +
                ", weights in L2; ratio = headroom over the 1-thread read probe"});
}

// Registers one bm_gemv case: manual time, kPairedRounds probe / GEMV pairs.
void register_paired_gemv(BenchContext& ctx, const std::string& name, const GemvCase& c) {
  benchmark::RegisterBenchmark(name.c_str(), bm_gemv, &ctx, c)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(kPairedRounds);
}

}  // namespace

void register_gemv(BenchContext& ctx) {
  // Decode speed first (small, L2-resident), then the DRAM-streaming cases.
  // The best variant at every batch on both shapes; the slower ones (fallbacks) at batch 1.
  for (kernels::Isa isa : kernels::supported_isas()) {
    if (isa == kernels::Isa::kScalar) continue;
    const bool best = isa == kernels::best_isa();
    for (Shape s : {Shape{64, 7168}, Shape{224, 2048}}) {
      for (int b : {1, 2, 4, 8}) {
        if (!best && (b > 1 || s.cols != 7168)) continue;
        const std::string name = "fp8_gemv_l2/" + std::string(kernels::isa_name(isa)) + "/" + std::to_string(s.rows) +
                                 "x" + std::to_string(s.cols) + "/batch:" + std::to_string(b);
        benchmark::RegisterBenchmark(name.c_str(), bm_gemv_l2, &ctx, s, b, isa, false, false)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.3);
      }
    }
  }
  // The AVX512-BF16 variant's shift decode from L2 (the decode the engine runs): records
  // fp8_gemv_l2_<shape>_b<B>_shifts.
  if (kernels::best_isa() == kernels::Isa::kAvx512Bf16) {
    for (Shape s : {Shape{64, 7168}, Shape{224, 2048}}) {
      for (int b : {1, 2, 4, 8}) {
        const std::string name = "fp8_gemv_l2_shifts/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 "/batch:" + std::to_string(b);
        benchmark::RegisterBenchmark(name.c_str(), bm_gemv_l2, &ctx, s, b, kernels::Isa::kAvx512Bf16, false, true)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.3);
      }
    }
  }
  // The opt-in AMX variant (kernels::fp8_gemv_amx) at every batch on both shapes: records
  // fp8_gemv_l2_<shape>_b<B>_amx.
  if (kernels::fp8_gemv_amx_supported()) {
    for (Shape s : {Shape{64, 7168}, Shape{224, 2048}}) {
      for (int b : {1, 2, 4, 8}) {
        const std::string name = "fp8_gemv_l2/amx/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 "/batch:" + std::to_string(b);
        benchmark::RegisterBenchmark(name.c_str(), bm_gemv_l2, &ctx, s, b, kernels::best_isa(), true, false)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.3);
      }
    }
  }
  for (Shape s : {Shape{2048, 7168}, Shape{7168, 2048}}) {
    for (int t : ctx.thread_counts()) {
      std::vector<int> batches{1};
      if (t == ctx.max_threads()) batches = {1, 2, 4, 8};
      for (int b : batches) {
        const std::string name = "fp8_gemv/" + std::to_string(s.rows) + "x" +
                                 std::to_string(s.cols) + "/batch:" + std::to_string(b) +
                                 "/threads:" + std::to_string(t);
        register_paired_gemv(ctx, name, {.s = s, .threads = t, .batch = b});
      }
    }
    // The same at batch 1 paired matrix by matrix (records fp8_gemv_<shape>_b1_fine).
    for (int t : ctx.thread_counts()) {
      const std::string name = "fp8_gemv_fine/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                               "/batch:1/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), bm_gemv_fine, &ctx, s, t)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(kPairedRounds);
    }
    // The shift decode (records fp8_gemv_<shape>_b<batch>_shifts) beside the table decode: batch 1
    // at every thread count, batch 2 at the most threads (the MoE layer's batch 2).
    if (kernels::isa_supported(kernels::Isa::kAvx512Bf16) && kernels::best_isa() == kernels::Isa::kAvx512Bf16) {
      for (int t : ctx.thread_counts()) {
        for (int b : t == ctx.max_threads() ? std::vector<int>{1, 2} : std::vector<int>{1}) {
          const std::string name = "fp8_gemv_shifts/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                   "/batch:" + std::to_string(b) + "/threads:" + std::to_string(t);
          register_paired_gemv(ctx, name, {.s = s, .threads = t, .batch = b, .shifts = true});
        }
      }
    }
    // Batch 1 with the tails of every worker's rows shared out (records fp8_gemv_<shape>_b1_tail),
    // at every thread count above 1.
    for (int t : ctx.thread_counts()) {
      if (t == 1) continue;
      const std::string name = "fp8_gemv_tail/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                               "/batch:1/threads:" + std::to_string(t);
      register_paired_gemv(ctx, name, {.s = s, .threads = t, .shared_tail = true});
    }
    // Right after the default cases, same shape, at all threads: the caller of run() spinning
    // at most 5 us before it sleeps (CallerWait::kAuto; the default spins up to
    // caller_spin_us), records fp8_gemv_<shape>_b1_auto.
    const std::string name = "fp8_gemv_auto/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                             "/batch:1/threads:" + std::to_string(ctx.max_threads());
    register_paired_gemv(ctx, name, {.s = s, .threads = ctx.max_threads(), .wait = cpu::CallerWait::kAuto});
    // The AMX variant at all threads, batch 1..8 (records fp8_gemv_<shape>_b<B>_amx), then at
    // batch 1 under other software prefetch (records fp8_gemv_<shape>_b1_amx_pf_<name>): nol1 =
    // the next group into L2 only, l1only = 512 bytes ahead into L1 only, off = none (the
    // hardware prefetchers alone), far = two groups ahead into L2, l1far = 1 KB ahead into L1.
    // At batch 1 on 16 threads the AMX variant streams 0.84-0.87x of AVX512-BF16 on the Xeon
    // while one core of it decodes faster in L2 (19.0 against 16.8 GB/s): how it keeps its
    // misses in flight is the suspect.
    if (kernels::fp8_gemv_amx_supported()) {
      for (int b : {1, 2, 4, 8}) {
        const std::string amx_name = "fp8_gemv_amx/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                     "/batch:" + std::to_string(b) + "/threads:" + std::to_string(ctx.max_threads());
        register_paired_gemv(ctx, amx_name, {.s = s, .threads = ctx.max_threads(), .batch = b, .amx = true});
      }
      static const AmxPrefetchVariant kAmxVariants[] = {
          {"nol1", {.groups_ahead = 1, .l1_ahead = 0}},   {"l1only", {.groups_ahead = 0, .l1_ahead = 512}},
          {"off", {.groups_ahead = 0, .l1_ahead = 0}},    {"far", {.groups_ahead = 2, .l1_ahead = 512}},
          {"l1far", {.groups_ahead = 1, .l1_ahead = 1024}},
      };
      for (const AmxPrefetchVariant& v : kAmxVariants) {
        const std::string amx_name = "fp8_gemv_amx_pf/" + std::string(v.name) + "/" + std::to_string(s.rows) + "x" +
                                     std::to_string(s.cols) + "/batch:1/threads:" + std::to_string(ctx.max_threads());
        register_paired_gemv(ctx, amx_name, {.s = s, .threads = ctx.max_threads(), .amx = true, .amx_variant = &v});
      }
    }
  }
  // Prefetch and row-order variants at batch 1, 1 thread and all threads (records
  // fp8_gemv_<shape>_b1_pf_<name>; each the default with its prefetch or its row order changed):
  // l2 = always into L2, l1 = always into L1 (the one that is not this CPU's default
  // (default_gemv_prefetch) also at 2, 4 and 8 threads: on the Xeon L2 beat L1 on
  // 7168x2048's 16 KB passes, on Zen 5 L1 beat L2),
  // nofirst = no up-front prefetch of a call's first pass;
  // off = no software prefetch (the hardware prefetchers alone: on Intel every software prefetch
  // holds one of the core's 16 L1 fill buffers until its line arrives, which may cap one core's
  // reads) also at 2, 4 and 8 threads; far = two passes ahead (1, 2, 4 and 8 threads: the
  // default's ratio fell to 0.82-0.89 at 4 and 8 threads on the 16-core Xeon, where the
  // loaded latency per thread is highest for the depth of prefetch).
  if (kernels::best_isa() != kernels::Isa::kAvx512Bf16) return;
  struct Case {
    PrefetchVariant v;
    std::vector<int> threads;
  };
  static const std::vector<Case> kCases = [&ctx] {
    const int all = ctx.max_threads();
    std::vector<int> one_two_all{1};
    for (const int t : {2, 4, 8})
      if (all >= t) one_two_all.push_back(t);
    if (all > one_two_all.back()) one_two_all.push_back(all);
    std::vector<int> one_all{1};
    if (all > 1) one_all.push_back(all);
    // The one of L1 / L2 that is not this CPU's default at every thread count up to 8 (the
    // default's own record is the comparison), the other at 1 and all.
    const kernels::GemvPrefetch def = kernels::default_gemv_prefetch();
    const bool l2_default = def.l1_bytes == 0;
    // Each variant changes the default's prefetch or its row order, not both.
    auto prefetch = [def](int64_t distance, int64_t l1_bytes, bool first_pass) {
      kernels::GemvPrefetch p = def;
      p.distance = distance;
      p.l1_bytes = l1_bytes;
      p.first_pass = first_pass;
      return p;
    };
    auto rows_in_turn = [def](int blocks, int streams) {
      kernels::GemvPrefetch p = def;
      p.row_blocks = blocks;
      p.row_streams = streams;
      return p;
    };
    std::vector<Case> cases{
        {{"l2", prefetch(-1, 0, true)}, l2_default ? one_all : one_two_all},
        {{"l1", prefetch(-1, int64_t{1} << 40, true)}, l2_default ? one_two_all : one_all},
        {{"nofirst", prefetch(-1, def.l1_bytes, false)}, one_all},
        {{"off", prefetch(0, 0, false)}, one_two_all},
    };
    // Row orders other than the default's (GemvPrefetch::row_blocks x row_streams: K blocks in
    // flight x rows at a time from as many parts of the call; rows0 = 8 adjacent rows side by
    // side): on the Zen 5 VM one thread read 27-31 GB/s from DRAM going through rows one after
    // another and 23-33 in the 8-row order (docs/experiments.md).
    for (const auto& [name, blocks, streams] : {std::tuple{"rows0", 0, 1}, {"rows4", 4, 1}, {"rows8", 8, 1},
                                                {"rows4x2", 4, 2}, {"rows2x4", 2, 4}}) {
      const bool same = blocks == def.row_blocks && (blocks == 0 || streams == def.row_streams);
      if (!same) cases.push_back({{name, rows_in_turn(blocks, streams)}, one_two_all});
    }
    return cases;
  }();
  // Grouped by thread count, so the paired probe's buffer (cached per thread count) is built once
  // per shape and count.
  static std::vector<std::unique_ptr<PrefetchVariant>> far;
  for (Shape s : {Shape{2048, 7168}, Shape{7168, 2048}}) {
    // Two passes ahead (8 rows x K each at batch 1), into L2; per shape, so it is a fixed variant.
    kernels::GemvPrefetch far_setting = kernels::default_gemv_prefetch();
    far_setting.distance = 2 * 8 * s.cols;
    far_setting.l1_bytes = 0;
    far_setting.first_pass = true;
    far.push_back(std::make_unique<PrefetchVariant>(PrefetchVariant{"far", far_setting}));
    std::vector<int> counts{1};
    for (const int t : {2, 4, 8})
      if (ctx.max_threads() >= t) counts.push_back(t);
    if (ctx.max_threads() > counts.back()) counts.push_back(ctx.max_threads());
    for (int t : counts) {
      std::vector<const PrefetchVariant*> variants;
      for (const Case& c : kCases) {
        if (std::find(c.threads.begin(), c.threads.end(), t) != c.threads.end()) variants.push_back(&c.v);
      }
      if (t <= 8) variants.push_back(far.back().get());
      // Each also with the shift decode (fp8_gemv_pf_shifts/..., records *_b1_pf_<name>_shifts):
      // its faster decode may want another prefetch than the table's.
      for (const bool shifts : {false, true}) {
        for (const PrefetchVariant* v : variants) {
          const std::string name = std::string(shifts ? "fp8_gemv_pf_shifts/" : "fp8_gemv_pf/") + v->name + "/" +
                                   std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                   "/batch:1/threads:" + std::to_string(t);
          register_paired_gemv(ctx, name, {.s = s, .threads = t, .variant = v, .shifts = shifts});
        }
      }
    }
    // The non-default one of l1 / l2 at batch 2 on all threads too (record
    // fp8_gemv_<shape>_b2_pf_l1 or _l2): the L1 rule covers batch 1-2.
    const char* other = kernels::default_gemv_prefetch().l1_bytes == 0 ? "l1" : "l2";
    const std::string b2 = "fp8_gemv_pf/" + std::string(other) + "/" + std::to_string(s.rows) + "x" +
                           std::to_string(s.cols) + "/batch:2/threads:" + std::to_string(ctx.max_threads());
    const auto v2 = std::find_if(kCases.begin(), kCases.end(),
                                 [other](const Case& c) { return std::string_view(c.v.name) == other; });
    register_paired_gemv(ctx, b2, {.s = s, .threads = ctx.max_threads(), .batch = 2, .variant = &v2->v});
  }
}

}  // namespace hymoe::bench
