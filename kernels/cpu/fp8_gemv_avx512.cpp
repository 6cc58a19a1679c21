// FP8 GEMV, AVX-512 F/BW variant for CPUs without BF16 dot products (Skylake-X, Ice Lake):
// 16 weights per step decoded straight to FP32 (Fp8F32Decoder), activations widened from BF16,
// FMA into FP32. The body is fp8_gemv_f32_body.h's; this file is the ISA's helpers.
#include <immintrin.h>

#include "fp8_decode_avx512.h"
#include "fp8_gemv_f32_body.h"

namespace hymoe::kernels::detail {
namespace {

struct Avx512Ops {
  using V = __m512;
  static constexpr int kWidth = 16;
  // Accumulators and totals in registers: 2 * R * B <= 16 ZMM.
  static constexpr int rows_per_pass(int b) { return b <= 2 ? 4 : b <= 4 ? 2 : 1; }

  Fp8F32Decoder dec;

  static __mmask16 tail(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }
  V decode(const uint8_t* w, int64_t n) const { return dec(_mm_maskz_loadu_epi8(tail(n), w)); }
  static V load_x(const uint16_t* x, int64_t n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(tail(n), x)), 16));
  }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float s) { return _mm512_set1_ps(s); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(V v) { return hsum512(v); }
  static void store(float* f, V v) { _mm512_store_ps(f, v); }
};

}  // namespace

void fp8_gemv_avx512(const Fp8GemvParams& p) { fp8_gemv_f32<Avx512Ops>(p); }

void fp8_to_bf16_avx512(const uint8_t* src, uint16_t* dst, size_t n) { fp8_to_bf16_f32<Avx512Ops>(src, dst, n); }

}  // namespace hymoe::kernels::detail
