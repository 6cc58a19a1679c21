// Internal, for TUs compiled with AVX512-BF16: the pieces of the FP8 GEMM shared by the
// AVX512-BF16 and AMX implementations.
//
// Panel: a 32-row x 128-column FP8 block of W (one K block, n0 % 32 == 0 so one scale row)
// decoded to BF16 in VNNI order: panel[kp * 32 + n] holds W[n0+n][k0+2kp .. k0+2kp+1] as one
// 32-bit pair. That is the B operand layout of both vdpbf16ps (16 n per ZMM) and AMX tdpbf16ps.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "fp8_decode_avx512.h"
#include "hymoe/kernels/fp8_gemm.h"

namespace hymoe::kernels::detail {

inline constexpr int kGemmPanelN = 32;
inline constexpr int kGemmPanelPairs = 64;  // 128 K values
inline constexpr int64_t kGemmChunkM = 512;  // rows of X/C kept hot while a panel is reused
// AMX computes a panel ~8x faster than vdpbf16ps, so it reuses each decoded panel over more rows
// (the decode and transpose of a panel would otherwise dominate).
inline constexpr int64_t kAmxChunkM = 1024;

// Transposes 16 x 16 32-bit elements in registers: r[i] (row i) becomes column i.
// (GCC 12's unpack intrinsics pass _mm512_undefined_epi32() and trip -Wuninitialized.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
inline void transpose16x16_epi32(__m512i r[16]) {
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane L: t[2i] = r[2i][4L], r[2i+1][4L], r[2i][4L+1], ...
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // u[4i + c], lane L: column 4L + c of rows 4i .. 4i+3
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {  // gather lane L of the four row groups into column 4L + c
    const __m512i x0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), x1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
    const __m512i y0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), y1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_i32x4(x0, y0, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(x1, y1, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(x0, y0, 0xDD);
    r[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xDD);
  }
}
#pragma GCC diagnostic pop

// Decodes W[n0 .. n0+32) x [k0, k1) into `panel`; rows past N and pairs past k1 are zero.
// Each row decodes to 64 BF16 pairs; the 32 x 64 pairs are transposed into the panel 16 x 16 at a
// time in registers (a scalar transpose was ~10% of the AVX512-BF16 GEMM's time).
inline void pack_panel(const Fp8MatrixView& w, int64_t n0, int64_t k0, int64_t k1,
                       const Fp8Bf16Decoder& dec, uint32_t* panel) {
  const int64_t rows = std::min<int64_t>(kGemmPanelN, w.rows - n0);
  const int64_t len = k1 - k0;
  alignas(64) uint32_t pairs[kGemmPanelN][kGemmPanelPairs];
  for (int64_t n = 0; n < kGemmPanelN; ++n) {
    for (int64_t k = 0; k < 2 * kGemmPanelPairs; k += 64) {
      const int64_t left = n < rows ? len - k : 0;
      const __mmask64 m = _cvtu64_mask64(left >= 64 ? ~uint64_t{0} : left <= 0 ? 0 : (uint64_t{1} << left) - 1);
      __m512i w0, w1;
      dec(_mm512_maskz_loadu_epi8(m, w.data + (n0 + std::min(n, rows - 1)) * w.cols + k0 + k), w0, w1);
      _mm512_store_si512(pairs[n] + k / 2, w0);
      _mm512_store_si512(pairs[n] + k / 2 + 16, w1);
    }
  }
  for (int rb = 0; rb < kGemmPanelN / 16; ++rb) {
    for (int cb = 0; cb < kGemmPanelPairs / 16; ++cb) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(pairs[rb * 16 + i] + cb * 16);
      transpose16x16_epi32(r);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) _mm512_store_si512(panel + (cb * 16 + j) * kGemmPanelN + rb * 16, r[j]);
    }
  }
}

// C[m0 .. m0+MR)[n0 .. n0+32) (+)= scale * X[m][k0..k1) . panel, for `ncols` <= 32 valid columns.
// first: store instead of accumulate (the first K block). Requires (k1 - k0) even.
// On Zen 5 it is bound by its one broadcast of an X pair per two dot products (broadcasts, like
// in-lane shuffles, issue about every other cycle) and by vdpbf16ps at about one per cycle once
// its operands vary.
template <int MR>
inline void microkernel(const Fp8GemmParams& p, const uint32_t* panel, int64_t m0, int64_t n0,
                        int64_t k0, int64_t k1, int64_t ncols, float scale, bool first) {
  // Fully unrolled so that the 2 x MR accumulators live in registers (GCC keeps arrays indexed by
  // a rolled loop in memory).
  __m512 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const int64_t pairs = (k1 - k0) / 2;
  const uint16_t* xrow = p.x + m0 * p.x_stride + k0;
  for (int64_t kp = 0; kp < pairs; ++kp) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(panel + kp * kGemmPanelN);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(panel + kp * kGemmPanelN + 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      int32_t pair;
      __builtin_memcpy(&pair, xrow + i * p.x_stride + 2 * kp, sizeof(pair));
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
  const __mmask16 m0k = ncols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << ncols) - 1u);
  const __mmask16 m1k = ncols >= 32 ? __mmask16(0xFFFF)
                        : ncols <= 16 ? __mmask16(0)
                                      : __mmask16((1u << (ncols - 16)) - 1u);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* c = p.c + (m0 + i) * p.c_stride + n0;
    // Explicit FMA: a mul and an add would be contracted in some MR instances and not others,
    // and a row's result would then depend on how many rows shared its call.
    __m512 v0, v1;
    if (first) {
      v0 = _mm512_mul_ps(acc[i][0], s);
      v1 = _mm512_mul_ps(acc[i][1], s);
    } else {
      v0 = _mm512_fmadd_ps(acc[i][0], s, _mm512_maskz_loadu_ps(m0k, c));
      v1 = _mm512_fmadd_ps(acc[i][1], s, _mm512_maskz_loadu_ps(m1k, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0k, v0);
    _mm512_mask_storeu_ps(c + 16, m1k, v1);
  }
}

// Rows [m_begin, m_end) of one panel with the 8-row micro-kernel and a tail.
inline void panel_rows_avx512bf16(const Fp8GemmParams& p, const uint32_t* panel, int64_t m_begin,
                                  int64_t m_end, int64_t n0, int64_t k0, int64_t k1,
                                  int64_t ncols, float scale, bool first) {
  int64_t m = m_begin;
  for (; m + 8 <= m_end; m += 8) microkernel<8>(p, panel, m, n0, k0, k1, ncols, scale, first);
  switch (m_end - m) {
    case 7: return microkernel<7>(p, panel, m, n0, k0, k1, ncols, scale, first);
    case 6: return microkernel<6>(p, panel, m, n0, k0, k1, ncols, scale, first);
    case 5: return microkernel<5>(p, panel, m, n0, k0, k1, ncols, scale, first);
    case 4: return microkernel<4>(p, panel, m, n0, k0, k1, ncols, scale, first);
    case 3: return microkernel<3>(p, panel, m, n0, k0, k1, ncols, scale, first);
    case 2: return microkernel<2>(p, panel, m, n0, k0, k1, ncols, scale, first);
    case 1: return microkernel<1>(p, panel, m, n0, k0, k1, ncols, scale, first);
    default: return;
  }
}

}  // namespace hymoe::kernels::detail
