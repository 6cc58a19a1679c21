// FP8 GEMM: argument checks, the reference, and the choice of implementation.
#include "hymoe/kernels/fp8_gemm.h"

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "variants.h"

namespace hymoe::kernels {

void validate(const Fp8GemmParams& p) {
  HYMOE_CHECK(p.w.data && p.w.scale_inv, kInvalidArgument, "fp8_gemm: null weight or scale");
  HYMOE_CHECK(p.w.rows > 0 && p.w.cols > 0 && p.w.cols % 2 == 0, kInvalidArgument,
              "fp8_gemm: weight {}x{} (K must be even)", p.w.rows, p.w.cols);
  HYMOE_CHECK(p.m >= 0 && p.x && p.x_stride >= p.w.cols, kInvalidArgument,
              "fp8_gemm: x_stride {} < K {}", p.x_stride, p.w.cols);
  HYMOE_CHECK(p.c && p.c_stride >= p.w.rows, kInvalidArgument, "fp8_gemm: c_stride {} < N {}",
              p.c_stride, p.w.rows);
  HYMOE_CHECK(0 <= p.n_begin && p.n_begin <= p.n_end && p.n_end <= p.w.rows &&
                  p.n_begin % 32 == 0 && (p.n_end % 32 == 0 || p.n_end == p.w.rows),
              kInvalidArgument, "fp8_gemm: columns [{}, {}) must be 32-aligned within [0, {})",
              p.n_begin, p.n_end, p.w.rows);
}

bool gemm_impl_supported(GemmImpl impl) {
  switch (impl) {
    case GemmImpl::kReference: return true;
    case GemmImpl::kAvx512Bf16: return isa_supported(Isa::kAvx512Bf16);
    case GemmImpl::kAmxBf16: return isa_supported(Isa::kAvx512Bf16) && amx_usable();
  }
  return false;
}

GemmImpl best_gemm_impl() {
  static const GemmImpl best = gemm_impl_supported(GemmImpl::kAmxBf16)      ? GemmImpl::kAmxBf16
                               : gemm_impl_supported(GemmImpl::kAvx512Bf16) ? GemmImpl::kAvx512Bf16
                                                                            : GemmImpl::kReference;
  return best;
}

const char* gemm_impl_name(GemmImpl impl) {
  switch (impl) {
    case GemmImpl::kReference: return "reference";
    case GemmImpl::kAvx512Bf16: return "avx512bf16";
    case GemmImpl::kAmxBf16: return "amx-bf16";
  }
  return "?";
}

double amx_peak_loop_flops(int64_t iters) { return detail::amx_peak_loop(iters); }

void fp8_gemm(GemmImpl impl, const Fp8GemmParams& p) {
  switch (impl) {
    case GemmImpl::kReference: return detail::fp8_gemm_reference(p);
    case GemmImpl::kAvx512Bf16: return detail::fp8_gemm_avx512bf16(p);
    case GemmImpl::kAmxBf16: return detail::fp8_gemm_amx(p);
  }
}

namespace detail {

void fp8_gemm_reference(const Fp8GemmParams& p) {
  for (int64_t m = 0; m < p.m; ++m) {
    for (int64_t n = p.n_begin; n < p.n_end; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < p.w.cols; ++k) {
        sum += static_cast<double>(fp8_e4m3_to_float(p.w.data[n * p.w.cols + k])) *
               p.w.scale(n, k) * bf16_to_float(p.x[m * p.x_stride + k]);
      }
      p.c[m * p.c_stride + n] = static_cast<float>(sum);
    }
  }
}

}  // namespace detail
}  // namespace hymoe::kernels
