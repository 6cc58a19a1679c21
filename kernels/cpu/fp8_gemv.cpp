// FP8 GEMV: argument checks and the runtime choice of variant.
#include "hymoe/kernels/fp8_gemv.h"

#include <atomic>
#include <cstdlib>

#include "hymoe/common/cpu_features.h"
#include "hymoe/common/error.h"
#include "hymoe/kernels/fp8_special_codes.h"
#include "variants.h"

namespace hymoe::kernels {

namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* env = std::getenv(name);
  return env ? std::strtoll(env, nullptr, 10) : fallback;
}

// The AVX512-BF16 GEMV's prefetch settings, read on every call (relaxed atomics: set_gemv_prefetch
// may run while other threads call the GEMV, each call sees one value of each field).
struct PrefetchState {
  std::atomic<int64_t> distance{env_int("HYMOE_GEMV_PREFETCH", default_gemv_prefetch().distance)};
  std::atomic<int64_t> l1_bytes{env_int("HYMOE_GEMV_PREFETCH_L1", default_gemv_prefetch().l1_bytes)};
  std::atomic<bool> first_pass{env_int("HYMOE_GEMV_PREFETCH_FIRST", default_gemv_prefetch().first_pass) != 0};
  std::atomic<int> row_blocks{static_cast<int>(env_int("HYMOE_GEMV_ROW_BLOCKS", default_gemv_prefetch().row_blocks))};
  std::atomic<int> row_streams{static_cast<int>(env_int("HYMOE_GEMV_ROW_STREAMS", default_gemv_prefetch().row_streams))};
};

PrefetchState& prefetch_state() {
  static PrefetchState s;
  return s;
}

}  // namespace

GemvPrefetch default_gemv_prefetch() {
  GemvPrefetch p;  // L2 (the header says why)
  if (cpu_features().vendor == CpuVendor::kAmd) p.l1_bytes = int64_t{1} << 40;  // always L1
  return p;
}

GemvPrefetch gemv_prefetch() {
  const PrefetchState& s = prefetch_state();
  return {s.distance.load(std::memory_order_relaxed), s.l1_bytes.load(std::memory_order_relaxed),
          s.first_pass.load(std::memory_order_relaxed), s.row_blocks.load(std::memory_order_relaxed),
          s.row_streams.load(std::memory_order_relaxed)};
}

void set_gemv_prefetch(const GemvPrefetch& p) {
  const int rb = p.row_blocks, rs = p.row_streams;
  HYMOE_CHECK(rb == 0 || (rb == 4 && rs == 1) || (rb == 8 && rs == 1) || (rb == 4 && rs == 2) || (rb == 2 && rs == 4),
              kInvalidArgument, "set_gemv_prefetch: row_blocks {} x row_streams {} is not 0 or one of 4 x 1, 8 x 1, "
              "4 x 2, 2 x 4", rb, rs);
  PrefetchState& s = prefetch_state();
  s.distance.store(p.distance, std::memory_order_relaxed);
  s.l1_bytes.store(p.l1_bytes, std::memory_order_relaxed);
  s.first_pass.store(p.first_pass, std::memory_order_relaxed);
  s.row_blocks.store(p.row_blocks, std::memory_order_relaxed);
  s.row_streams.store(p.row_streams, std::memory_order_relaxed);
}

namespace {

struct AmxPrefetchState {
  std::atomic<int> groups_ahead{AmxGemvPrefetch{}.groups_ahead};
  std::atomic<int64_t> l1_ahead{AmxGemvPrefetch{}.l1_ahead};
};

AmxPrefetchState& amx_prefetch_state() {
  static AmxPrefetchState s;
  return s;
}

}  // namespace

AmxGemvPrefetch amx_gemv_prefetch() {
  const AmxPrefetchState& s = amx_prefetch_state();
  return {s.groups_ahead.load(std::memory_order_relaxed), s.l1_ahead.load(std::memory_order_relaxed)};
}

void set_amx_gemv_prefetch(const AmxGemvPrefetch& p) {
  AmxPrefetchState& s = amx_prefetch_state();
  s.groups_ahead.store(p.groups_ahead, std::memory_order_relaxed);
  s.l1_ahead.store(p.l1_ahead, std::memory_order_relaxed);
}

void validate(const Fp8GemvParams& p) {
  HYMOE_CHECK(p.w.data && p.w.scale_inv, kInvalidArgument, "fp8_gemv: null weight or scale");
  HYMOE_CHECK(p.w.rows > 0 && p.w.cols > 0, kInvalidArgument, "fp8_gemv: empty weight {}x{}",
              p.w.rows, p.w.cols);
  HYMOE_CHECK(p.batch >= 1 && p.batch <= kMaxGemvBatch, kInvalidArgument,
              "fp8_gemv: batch {} outside 1..{}", p.batch, kMaxGemvBatch);
  for (int b = 0; b < p.batch; ++b) {
    HYMOE_CHECK(p.x[b] && p.y[b], kInvalidArgument, "fp8_gemv: null x or y of batch row {}", b);
  }
  HYMOE_CHECK(!p.w.specials || p.w.specials->row_start.size() == static_cast<size_t>(p.w.rows) + 1,
              kInvalidArgument, "fp8_gemv: special codes of {} rows for a {}-row weight",
              p.w.specials ? static_cast<int64_t>(p.w.specials->row_start.size()) - 1 : 0, p.w.rows);
  HYMOE_CHECK(0 <= p.row_begin && p.row_begin <= p.row_end && p.row_end <= p.w.rows,
              kInvalidArgument, "fp8_gemv: rows [{}, {}) outside [0, {})", p.row_begin,
              p.row_end, p.w.rows);
}

void fp8_gemv(Isa isa, const Fp8GemvParams& p) {
  switch (isa) {
    case Isa::kScalar: return detail::fp8_gemv_scalar(p);
    case Isa::kAvx2: return detail::fp8_gemv_avx2(p);
    case Isa::kAvx512: return detail::fp8_gemv_avx512(p);
    case Isa::kAvx512Bf16: return detail::fp8_gemv_avx512bf16(p);
  }
}

void fp8_gemv(const Fp8GemvParams& p) { fp8_gemv(best_isa(), p); }

void fp8_gemv_amx(const Fp8GemvParams& p) { detail::fp8_gemv_amx(p); }

bool fp8_gemv_amx_supported() { return isa_supported(Isa::kAvx512Bf16) && amx_usable(); }

void fp8_to_bf16(Isa isa, const uint8_t* src, uint16_t* dst, size_t n) {
  switch (isa) {
    case Isa::kScalar: return detail::fp8_to_bf16_scalar(src, dst, n);
    case Isa::kAvx2: return detail::fp8_to_bf16_avx2(src, dst, n);
    case Isa::kAvx512: return detail::fp8_to_bf16_avx512(src, dst, n);
    case Isa::kAvx512Bf16: return detail::fp8_to_bf16_avx512bf16(src, dst, n);
  }
}

}  // namespace hymoe::kernels
