// One core's rate of the instructions in the AVX512-BF16 FP8 GEMV's inner loop
// (kernels/cpu/fp8_gemv_avx512bf16.cpp), register to register with no memory traffic: what bounds
// that kernel's decode and dot product where its weights sit in L2. Only where the CPU has
// AVX512-BF16 and VBMI (the functions are compiled for them, the binary runs anywhere). Records:
// - cpu_op_rate_<op> (Gop/s): vdpbf16ps, vpermt2b, vpunpcklbw and vpternlogd, each alone over 16
//   independent chains (enough to cover their latencies), and "vdpbf16ps+vpermt2b" (pairs of one
//   each, G pairs/s): near the slower one's rate alone if the two issue to separate ports, near
//   half of it if they share one.
// - fp8_gemv_op_mix_b1 (GB/s of FP8 codes): the kernel's batch-1 loop body without its loads
//   (per 64 codes: 2 vpermt2b, a vpternlogd, 2 vpunpck and 2 vdpbf16ps) over 8 independent rows,
//   as the kernel runs 8 rows a pass; ratio = fp8_gemv_l2_64x7168_b1 (the kernel with its weights
//   in L2, when bench-cpu ran it first) over this.
// - fp8_gemv_op_mix_shift_b1: the same with an arithmetic decode of normal codes (shifts and
//   logic; exponent-0 codes only detected), against the table decode's mix: what a decode without
//   byte permutes could gain on this core.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "bench_context.h"
#include "hymoe/common/cpu_features.h"

namespace hymoe::bench {
namespace {

#define HYMOE_OP_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vbmi")))

using Clock = std::chrono::steady_clock;
constexpr int64_t kIterations = 4'000'000;  // ~50-150 ms a case

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Each case's result folded into a sink, so the compiler cannot drop the loop.
HYMOE_OP_TARGET uint32_t fold(const __m512i* v, int n) {
  __m512i s = _mm512_setzero_si512();
  for (int i = 0; i < n; ++i) s = _mm512_xor_si512(s, v[i]);
  alignas(64) uint32_t words[16];
  _mm512_store_si512(words, s);
  uint32_t x = 0;
  for (const uint32_t w : words) x ^= w;
  return x;
}

// Op rates (Gop/s) of one instruction over 16 chains; pair: vdpbf16ps and vpermt2b interleaved.
enum class Op { kDpbf16, kPermt2b, kUnpack, kTernlog, kPair };

template <Op kOp>
HYMOE_OP_TARGET double op_rate(uint32_t& sink) {
  __m512i v[16];
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) {
    v[i] = _mm512_set1_epi16(static_cast<int16_t>(0x3f80 + i));
    acc[i] = _mm512_setzero_ps();
  }
  __m512i a = _mm512_set1_epi16(0x3f80), b = _mm512_set1_epi8(3);
  const auto t0 = Clock::now();  // (no lambda: it would not inherit the target attribute)
  for (int64_t it = 0; it < kIterations; ++it) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if constexpr (kOp == Op::kDpbf16) {
        acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)a, (__m512bh)v[j]);
      } else if constexpr (kOp == Op::kPermt2b) {
        v[j] = _mm512_permutex2var_epi8(a, v[j], b);
      } else if constexpr (kOp == Op::kUnpack) {
        v[j] = _mm512_unpacklo_epi8(v[j], b);
      } else if constexpr (kOp == Op::kTernlog) {
        v[j] = _mm512_ternarylogic_epi32(v[j], a, b, 0xF8);
      } else {
        acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)a, (__m512bh)b);
        v[j] = _mm512_permutex2var_epi8(a, v[j], b);
      }
    }
    asm volatile("" : "+v"(a));
  }
  const double s = seconds_since(t0);
  for (int i = 0; i < 16; ++i) v[i] = _mm512_xor_si512(v[i], _mm512_castps_si512(acc[i]));
  sink ^= fold(v, 16);
  return static_cast<double>(kIterations) * 16 / s / 1e9;
}

// The batch-1 loop body over 8 rows: GB/s of FP8 codes.
HYMOE_OP_TARGET double op_mix_b1(uint32_t& sink) {
  const __m512i lo_a = _mm512_set1_epi8(1), lo_b = _mm512_set1_epi8(2), hi_a = _mm512_set1_epi8(0x3c),
                hi_b = _mm512_set1_epi8(0x40), sign = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i x0 = _mm512_set1_epi16(0x3f80), x1 = _mm512_set1_epi16(0x3f00);
  __m512i codes[8];
  __m512 acc[8];
  for (int r = 0; r < 8; ++r) {
    codes[r] = _mm512_set1_epi8(static_cast<char>(17 * r + 5));
    acc[r] = _mm512_setzero_ps();
  }
  const auto t0 = Clock::now();
  for (int64_t it = 0; it < kIterations; ++it) {
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      asm volatile("" : "+v"(codes[r]));  // fresh codes each step, as loaded
      const __m512i lo = _mm512_permutex2var_epi8(lo_a, codes[r], lo_b);
      __m512i hi = _mm512_permutex2var_epi8(hi_a, codes[r], hi_b);
      hi = _mm512_ternarylogic_epi32(hi, codes[r], sign, 0xF8);
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_unpacklo_epi8(lo, hi), (__m512bh)x0);
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_unpackhi_epi8(lo, hi), (__m512bh)x1);
    }
  }
  const double s = seconds_since(t0);
  __m512i v[8];
  for (int r = 0; r < 8; ++r) v[r] = _mm512_castps_si512(acc[r]);
  sink ^= fold(v, 8);
  return static_cast<double>(kIterations) * 8 * 64 / s / 1e9;
}

// The same with the arithmetic decode of normal codes (kernels' "shift decode", not the kernel's
// decode: it needs a fix-up for exponent-0 and NaN codes, here only their detection, a test and
// a branch never taken): BF16 = sign | ((magnitude << 4) + (120 << 7)), even and odd codes of
// each 16-bit word apart, by shifts and logic instead of byte permutes.
HYMOE_OP_TARGET double op_mix_shift_b1(uint32_t& sink) {
  const __m512i mag_bits = _mm512_set1_epi16(0x07F0), bias = _mm512_set1_epi16(0x3C00),
                sign = _mm512_set1_epi16(static_cast<int16_t>(0x8000)), exp_bits = _mm512_set1_epi8(0x78);
  const __m512i x0 = _mm512_set1_epi16(0x3f80), x1 = _mm512_set1_epi16(0x3f00);
  __m512i codes[8];
  __m512 acc[8];
  for (int r = 0; r < 8; ++r) {
    codes[r] = _mm512_set1_epi8(static_cast<char>(0x40 + r));  // normal codes: the branch stays cold
    acc[r] = _mm512_setzero_ps();
  }
  uint64_t specials = 0;
  const auto t0 = Clock::now();
  for (int64_t it = 0; it < kIterations; ++it) {
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      asm volatile("" : "+v"(codes[r]));
      const __m512i w = codes[r];
      if (!_kortestz_mask64_u8(_mm512_testn_epi8_mask(w, exp_bits), 0)) ++specials;  // exponent-0 codes
      const __m512i odd = _mm512_ternarylogic_epi32(
          _mm512_add_epi16(_mm512_and_si512(_mm512_srli_epi16(w, 4), mag_bits), bias), w, sign, 0xF8);
      const __m512i even = _mm512_ternarylogic_epi32(
          _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(w, 4), mag_bits), bias), _mm512_slli_epi16(w, 8),
          sign, 0xF8);
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)even, (__m512bh)x0);
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)odd, (__m512bh)x1);
    }
  }
  const double s = seconds_since(t0);
  __m512i v[8];
  for (int r = 0; r < 8; ++r) v[r] = _mm512_castps_si512(acc[r]);
  sink ^= fold(v, 8) ^ static_cast<uint32_t>(specials);
  return static_cast<double>(kIterations) * 8 * 64 / s / 1e9;
}

void bm_op_rate(benchmark::State& state, BenchContext* ctx) {
  uint32_t sink = 0;
  double mix = 0;
  for (auto _ : state) mix = op_mix_b1(sink);
  const struct {
    double (*rate)(uint32_t&);
    const char* name;
    const char* unit;
  } ops[] = {{op_rate<Op::kDpbf16>, "vdpbf16ps", "Gop/s"},
             {op_rate<Op::kPermt2b>, "vpermt2b", "Gop/s"},
             {op_rate<Op::kUnpack>, "vpunpcklbw", "Gop/s"},
             {op_rate<Op::kTernlog>, "vpternlogd", "Gop/s"},
             {op_rate<Op::kPair>, "vdpbf16ps+vpermt2b", "Gpair/s"}};
  for (const auto& o : ops) {
    const double rate = o.rate(sink);
    state.counters[o.name] = rate;
    ctx->put({std::string("cpu_op_rate_") + o.name, 1, rate, o.unit, 0, 0,
              "zmm, register to register, 16 independent chains, one core"});
  }
  const double shift = op_mix_shift_b1(sink);
  benchmark::DoNotOptimize(sink);
  double kernel = 0;
  for (const auto& r : ctx->records())
    if (r.name == "fp8_gemv_l2_64x7168_b1" && r.threads == 1) kernel = r.value;
  state.counters["op_mix_GBps"] = mix;
  ctx->put({"fp8_gemv_op_mix_b1", 1, mix, "GB/s", 0, kernel > 0 ? kernel / mix : 0,
            fmt::format("the AVX512-BF16 GEMV's batch-1 loop body over 8 rows without loads, one core; ratio = "
                        "fp8_gemv_l2_64x7168_b1 ({:.2f} GB/s) over it",
                        kernel)});
  state.counters["op_mix_shift_GBps"] = shift;
  ctx->put({"fp8_gemv_op_mix_shift_b1", 1, shift, "GB/s", mix, shift / mix,
            "the same loop with the arithmetic decode of normal codes (shifts and logic, a test for exponent-0 "
            "codes; no fix-up), one core; ceiling = fp8_gemv_op_mix_b1 (the table decode)"});
}

}  // namespace

void register_op_rate(BenchContext& ctx) {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx512() && f.avx512_bf16 && f.avx512_vbmi)) return;
  benchmark::RegisterBenchmark("cpu_op_rate", bm_op_rate, &ctx)->Iterations(1)->Unit(benchmark::kMillisecond);
}

}  // namespace hymoe::bench
