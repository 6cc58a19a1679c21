// FP8 GEMV: argument checks and the runtime choice of variant.
#include "hymoe/kernels/fp8_gemv.h"

#include <cstdlib>

#include "hymoe/common/error.h"
#include "variants.h"

namespace hymoe::kernels {

int64_t detail::gemv_prefetch_distance() {
  static const int64_t distance = [] {
    const char* env = std::getenv("HYMOE_GEMV_PREFETCH");
    return env ? std::strtoll(env, nullptr, 10) : kGemvPrefetchDistance;
  }();
  return distance;
}

int64_t detail::gemv_prefetch_l1_bytes() {
  static const int64_t bytes = [] {
    const char* env = std::getenv("HYMOE_GEMV_PREFETCH_L1");
    return env ? std::strtoll(env, nullptr, 10) : kGemvPrefetchL1Bytes;
  }();
  return bytes;
}

bool detail::gemv_prefetch_first_pass() {
  static const bool on = [] {
    const char* env = std::getenv("HYMOE_GEMV_PREFETCH_FIRST");
    return !env || std::strtoll(env, nullptr, 10) != 0;
  }();
  return on;
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

void fp8_to_bf16(Isa isa, const uint8_t* src, uint16_t* dst, size_t n) {
  switch (isa) {
    case Isa::kScalar: return detail::fp8_to_bf16_scalar(src, dst, n);
    case Isa::kAvx2: return detail::fp8_to_bf16_avx2(src, dst, n);
    case Isa::kAvx512: return detail::fp8_to_bf16_avx512(src, dst, n);
    case Isa::kAvx512Bf16: return detail::fp8_to_bf16_avx512bf16(src, dst, n);
  }
}

}  // namespace hymoe::kernels
