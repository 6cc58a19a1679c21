// Internal: the per-ISA entry points behind the dispatching functions of include/hymoe/kernels/.
// Each *_<isa>.cpp file is compiled with that ISA's -m flags and defines only its own functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hymoe/kernels/bf16_gemv.h"
#include "hymoe/kernels/fp8_gemm.h"
#include "hymoe/kernels/fp8_gemv.h"
#include "hymoe/kernels/mla_attention.h"

namespace hymoe::kernels::detail {

void fp8_gemv_scalar(const Fp8GemvParams& p);
void fp8_gemv_avx2(const Fp8GemvParams& p);
void fp8_gemv_avx512(const Fp8GemvParams& p);
void fp8_gemv_avx512bf16(const Fp8GemvParams& p);
void fp8_gemv_amx(const Fp8GemvParams& p);  // AMX-BF16 tiles; needs amx_usable()
double amx_peak_loop(int64_t iters);         // kernels::amx_peak_loop_flops

void fp8_to_bf16_scalar(const uint8_t* src, uint16_t* dst, size_t n);
void fp8_to_bf16_avx2(const uint8_t* src, uint16_t* dst, size_t n);
void fp8_to_bf16_avx512(const uint8_t* src, uint16_t* dst, size_t n);
void fp8_to_bf16_avx512bf16(const uint8_t* src, uint16_t* dst, size_t n);

void bf16_gemv_scalar(const Bf16GemvParams& p);
void bf16_gemv_avx2(const Bf16GemvParams& p);
void bf16_gemv_avx512(const Bf16GemvParams& p);

void mla_absorb_scalar(const MlaAbsorbParams& p);
void mla_absorb_avx512(const MlaAbsorbParams& p);
void mla_attention_scalar(const MlaAttentionParams& p, MlaAttentionScratch& scratch);
void mla_attention_avx512(const MlaAttentionParams& p, MlaAttentionScratch& scratch);
void mla_attention_avx512bf16(const MlaAttentionParams& p, MlaAttentionScratch& scratch);

void fp8_gemm_reference(const Fp8GemmParams& p);
void fp8_gemm_avx512bf16(const Fp8GemmParams& p);
void fp8_gemm_amx(const Fp8GemmParams& p);

// The one switch from a runtime GEMV batch (1..kMaxGemvBatch) to a template parameter:
// calls fn.template operator()<B>(). validate() rejects other sizes before any call.
template <typename F>
void with_gemv_batch(int batch, F&& fn) {
  switch (batch) {
    case 1: return fn.template operator()<1>();
    case 2: return fn.template operator()<2>();
    case 3: return fn.template operator()<3>();
    case 4: return fn.template operator()<4>();
    case 5: return fn.template operator()<5>();
    case 6: return fn.template operator()<6>();
    case 7: return fn.template operator()<7>();
    case 8: return fn.template operator()<8>();
    default: return;
  }
}

// Calls fn.template operator()<R>(i) for each whole pass of R rows from i in [begin, end), then
// fn.template operator()<1>(i) for each row left over.
template <int R, typename F>
void for_row_passes(int64_t begin, int64_t end, F&& fn) {
  int64_t i = begin;
  for (; i + R <= end; i += R) fn.template operator()<R>(i);
  for (; i < end; ++i) fn.template operator()<1>(i);
}

// Rows per pass of the AVX2 BF16 GEMV at T tokens: 8 at one, 4 at two, 2 at three or four
// (R x T <= 8 accumulators in registers, the rest of the 16 ymm for activations and weights).
struct Bf16GemvRowsAvx2 {
  template <int T>
  static constexpr int rows = T == 1 ? 8 : T == 2 ? 4 : 2;
};

// The vector BF16 GEMV variants' outer loop: tokens in blocks of up to 4, rows in passes of
// Rows::rows<T>, each pass by fn.template operator()<T, R>(t0, i) (T tokens from t0, R rows from
// i; R < Rows::rows<T> only for the rows left over).
template <typename Rows, typename F>
void bf16_gemv_blocks(const Bf16GemvParams& p, F&& fn) {
  auto tokens = [&]<int T>(int64_t t0) {
    for_row_passes<Rows::template rows<T>>(
        p.row_begin, p.row_end, [&]<int R>(int64_t i) { fn.template operator()<T, R>(t0, i); });
  };
  for (int64_t t0 = 0; t0 < p.tokens; t0 += 4) {
    switch (p.tokens - t0) {
      case 1: tokens.template operator()<1>(t0); break;
      case 2: tokens.template operator()<2>(t0); break;
      case 3: tokens.template operator()<3>(t0); break;
      default: tokens.template operator()<4>(t0); break;
    }
  }
}

// The weight rows and block-scale rows of the R rows from i0 that one GEMV pass reads.
template <int R>
struct GemvPassRows {
  const uint8_t* w[R];
  const float* scale[R];
  GemvPassRows(const Fp8MatrixView& m, int64_t i0) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      w[r] = m.data + (i0 + r) * m.cols;
      scale[r] = m.scale_inv + ((i0 + r) / Fp8MatrixView::kBlock) * m.scale_cols();
    }
  }
};

// AVX512-BF16 GEMV rows per pass for a batch size, with R x B ZMM accumulators: more rows per
// pass at small batches keep several weight streams in flight and reuse each activation load R
// times. R * B <= 8 keeps the block totals in registers too; batch 3..8 take R = 2 (totals in
// L1 from batch 5) so each activation load from L1/L2 serves two rows (batch 5..8 decode both
// rows first, then load each activation vector once: 2RB accumulators + 2R weights + 2 x).
constexpr int gemv_rows_per_pass(int batch) { return batch <= 1 ? 8 : batch <= 2 ? 4 : 2; }

// Largest B * K (rounded up to 64) whose activations the AVX512-BF16 GEMV copies into lane
// order on the stack (128 KB): every DeepSeek-V3 shape at batch 8 except K = 18432 (batch <= 3).
inline constexpr int64_t kGemvLaneOrderWords = 64 * 1024;

}  // namespace hymoe::kernels::detail
