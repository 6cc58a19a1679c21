// Internal: the FP8 GEMV body shared by the FP32-FMA variants (AVX2, AVX-512 F/BW). Included by
// each variant's translation unit, which compiles it with its own -m flags and supplies the ISA as
// a small traits type:
//
//   struct Ops {
//     using V = ...;                             // FP32 vector of kWidth lanes
//     static constexpr int kWidth;
//     static constexpr int rows_per_pass(int b); // R for batch b: R * B (accumulators + totals) fit
//     Decoder ...;                               // state the decode needs (tables), built per call
//     V decode(const uint8_t* w, int64_t n);     // kWidth codes (n < kWidth: the first n, rest 0)
//     static V load_x(const uint16_t* x, int64_t n);  // kWidth BF16 widened (same tail rule)
//     static V zero(); static V set1(float); static V fma(V a, V b, V c);  // a * b + c
//     static float hsum(V); static void store(float*, V);  // store: aligned, for tests
//   };
//
// Per 128-wide K block each row's partial sums are scaled into its totals with one FMA.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "variants.h"

namespace hymoe::kernels::detail {

template <typename Ops, int B, int R>
void fp8_gemv_f32_rows(const Fp8GemvParams& p, const Ops& ops, int64_t i0) {
  using V = typename Ops::V;
  constexpr int W = Ops::kWidth;
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  const GemvPassRows<R> rows(p.w, i0);
  const auto& wrow = rows.w;
  const auto& srow = rows.scale;
  V tot[R][B];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) tot[r][b] = Ops::zero();

  for (int64_t kb = 0; kb < scale_cols; ++kb) {
    const int64_t k0 = kb * Fp8MatrixView::kBlock;
    const int64_t k1 = std::min(k_total, k0 + Fp8MatrixView::kBlock);
    V acc[R][B];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[r][b] = Ops::zero();
    auto step = [&](int64_t k, int64_t n) {
      V xv[B];
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) xv[b] = Ops::load_x(p.x[b] + k, n);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const V wv = ops.decode(wrow[r] + k, n);
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) acc[r][b] = Ops::fma(wv, xv[b], acc[r][b]);
      }
    };
    int64_t k = k0;
    for (; k + W <= k1; k += W) step(k, W);  // n = W: the helpers' tail branches fold away
    if (k < k1) step(k, k1 - k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V s = Ops::set1(srow[r][kb]);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) tot[r][b] = Ops::fma(acc[r][b], s, tot[r][b]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) p.y[b][i0 + r] = Ops::hsum(tot[r][b]) * p.out_scale[b];
}

// The whole call: every batch size, row passes of Ops::rows_per_pass(B) rows.
template <typename Ops>
void fp8_gemv_f32(const Fp8GemvParams& p) {
  const Ops ops;
  with_gemv_batch(p.batch, [&]<int B>() {
    constexpr int R = Ops::rows_per_pass(B);
    for_row_passes<R>(p.row_begin, p.row_end, [&]<int N>(int64_t i) { fp8_gemv_f32_rows<Ops, B, N>(p, ops, i); });
  });
}

// Test entry: n codes to BF16 through the variant's FP32 decode (exact: an FP8 value has at
// most 4 significant bits, so dropping the low 16 bits of its FP32 loses nothing).
template <typename Ops>
void fp8_to_bf16_f32(const uint8_t* src, uint16_t* dst, size_t n) {
  const Ops ops;
  constexpr int W = Ops::kWidth;
  for (size_t i = 0; i < n; i += W) {
    const int64_t left = static_cast<int64_t>(n - i);
    alignas(64) float f[W];
    Ops::store(f, ops.decode(src + i, left));
    for (int64_t j = 0; j < std::min<int64_t>(W, left); ++j)
      dst[i + j] = static_cast<uint16_t>(std::bit_cast<uint32_t>(f[j]) >> 16);
  }
}

}  // namespace hymoe::kernels::detail
