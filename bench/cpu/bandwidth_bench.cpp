// The ceiling: DRAM read bandwidth on the same pinned threads the kernels use. Each thread reads
// its own first-touched slice of a buffer several times the L3 with four interleaved streams of
// 64-byte AVX-512 loads (AVX2 where there is no AVX-512), no stores.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <chrono>

#include "bench_context.h"
#include "hymoe/common/cpu_features.h"

namespace hymoe::bench {
namespace {

__attribute__((target("avx512f"))) uint64_t read_avx512(const std::byte* p, size_t n) {
  const size_t part = n / 4 / 256 * 256;
  const std::byte* s[4] = {p, p + part, p + 2 * part, p + 3 * part};
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < part; i += 128) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(s[0] + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(s[1] + i));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(s[2] + i));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(s[3] + i));
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(s[0] + i + 64));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(s[1] + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(s[2] + i + 64));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(s[3] + i + 64));
  }
  alignas(64) uint64_t out[8];
  _mm512_store_si512(out, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t sum = 0;
  for (uint64_t v : out) sum += v;
  return sum;
}

__attribute__((target("avx2"))) uint64_t read_avx2(const std::byte* p, size_t n) {
  const size_t part = n / 4 / 256 * 256;
  const std::byte* s[4] = {p, p + part, p + 2 * part, p + 3 * part};
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < part; i += 64) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[0] + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[1] + i)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[2] + i)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[3] + i)));
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[0] + i + 32)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[1] + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[2] + i + 32)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(s[3] + i + 32)));
  }
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return out[0] + out[1] + out[2] + out[3];
}

}  // namespace

uint64_t read_probe_slice(const std::byte* p, size_t n) {
  static const bool avx512 = cpu_features().avx512f;
  return avx512 ? read_avx512(p, n) : read_avx2(p, n);
}

namespace {

void bm_read_bandwidth(benchmark::State& state, BenchContext* ctx, int threads) {
  cpu::ThreadPool& pool = ctx->pool(threads);
  const size_t slice = ctx->streaming_bytes() / threads / 4096 * 4096;
  HugeBuffer& buf = ctx->cached<HugeBuffer>("probe", std::to_string(threads), [&] {
    auto b = new HugeBuffer(slice * threads);
    pool.run([&](const cpu::WorkerInfo& w) {  // first touch by the reading thread
      fill_random_fp8(b->data() + w.index * slice, slice, w.index);
    });
    return b;
  });
  const bool avx512 = cpu_features().avx512f;
  uint64_t sink = 0;
  double bytes = 0, seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](const cpu::WorkerInfo& w) {
      const std::byte* p = buf.data() + w.index * slice;
      const uint64_t r = read_probe_slice(p, slice);
      if (r == 42) sink = r;  // keeps the reads
    });
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    bytes += static_cast<double>(slice * threads);
    seconds += dt;
  }
  benchmark::DoNotOptimize(sink);
  const double gbps = bytes / seconds / 1e9;
  state.counters["GBps"] = gbps;
  ctx->set_probe_gbps(threads, gbps);
  ctx->put({"read_bandwidth_probe", threads, gbps, "GB/s", gbps, 1.0,
            avx512 ? "AVX-512 loads, 4 streams per thread" : "AVX2 loads, 4 streams per thread"});
}

}  // namespace

void register_bandwidth(BenchContext& ctx) {
  for (int t : ctx.thread_counts()) {
    benchmark::RegisterBenchmark(("read_bandwidth/threads:" + std::to_string(t)).c_str(),
                                 bm_read_bandwidth, &ctx, t)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.5);
  }
}

}  // namespace hymoe::bench
