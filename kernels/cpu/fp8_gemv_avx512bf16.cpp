// FP8 GEMV, AVX512-BF16 (+VBMI) variant: 64 weights per step decoded to 2 x 32 BF16 and dotted
// with BF16 activations by vdpbf16ps. R rows x B batch accumulators per pass (R * B <= 16); each
// 128-wide K block's partial sums are scaled into totals with one FMA (in registers while
// R * B <= 8, else in L1).
// Decode: by table lookup (Fp8Bf16Decoder), or, when the matrix comes with its special codes
// (Fp8MatrixView::specials), by shifts (Fp8ShiftDecoder: 5 instructions, no byte permute), each row
// then corrected for its special codes. The activations are copied once per call into the order
// the weights decode to: lane order (table; natural order when B * K exceeds
// kGemvLaneOrderWords) or pair order (shifts; a per-thread buffer, so every batch size takes the
// same path and rows stay batch-invariant).
#include <immintrin.h>

#include <algorithm>

#include "fp8_decode_avx512.h"
#include "growing_buffer.h"
#include "hymoe/kernels/fp8_special_codes.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

// What one call's passes share: the weights, the B activation rows (as given, or copied in lane
// order), and the prefetch distance.
template <int B>
struct Pass {
  const Fp8GemvParams& p;
  const Fp8Bf16Decoder& dec;
  const Fp8ShiftDecoder& shift;
  const uint16_t* x[B];
  int64_t ahead;     // prefetch distance in bytes
  int64_t l1_bytes;  // GemvPrefetch::l1_bytes
  int row_blocks;     // GemvPrefetch::row_blocks and row_streams (batch 1 only)
  int row_streams;
};

// R rows x B batch rows in one pass over R weight rows. kLane: the weights decode by table and
// unpacks and x is in lane order; kPair: by shifts, x in pair order (both zero-padded to a
// multiple of 64); kNatural: by table and byte permutes, x as given, masked tails.
// Accumulators in registers; block totals too while R * B <= 8, else in L1.
enum class Order { kNatural, kLane, kPair };
// Where the software prefetch puts the lines ahead (kNone: the hardware prefetchers alone).
enum class Pf { kNone, kL2, kL1 };

// What kPair adds to row i's sum (before out_scale) for its special codes: their exact value
// minus their shift value, times block scale and activation (x as given, natural order).
inline const std::array<float, 256> kShiftCorrection = [] {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = fp8_shift_correction(static_cast<uint8_t>(c));
  return t;
}();
float special_code_sum(const Fp8MatrixView& w, int64_t i, const uint16_t* x) {
  const Fp8SpecialCodes& s = *w.specials;
  const float* scale = w.scale_inv + (i / Fp8MatrixView::kBlock) * w.scale_cols();
  float sum = 0.0f;
  for (int64_t j = s.row_start[i]; j < s.row_start[i + 1]; ++j) {
    const uint32_t col = s.col[j];
    sum += kShiftCorrection[s.code[j]] * scale[col / Fp8MatrixView::kBlock] * bf16_to_float(x[col]);
  }
  return sum;
}

// 64 codes -> two BF16 vectors in kOrder's decode. A copy of the decoders, so that their constants
// stay in registers: read through Pass's references, GCC 12 reloaded them from memory every step.
template <Order kOrder>
struct Decode {
  Fp8Bf16Decoder dec;
  Fp8ShiftDecoder shift;
  void operator()(__m512i codes, __m512i& w0, __m512i& w1) const {
    if constexpr (kOrder == Order::kPair) shift(codes, w0, w1);
    else if constexpr (kOrder == Order::kLane) dec.lane_order(codes, w0, w1);
    else dec(codes, w0, w1);
  }
};

template <int B, int R, Order kOrder, Pf kPf>
void gemv_rows(const Pass<B>& a, int64_t i0) {
  constexpr bool kLaneOrder = kOrder != Order::kNatural;  // x copied, zero-padded
  const Fp8GemvParams& p = a.p;
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  const GemvPassRows<R> rows(p.w, i0);
  const auto& wrow = rows.w;
  const auto& srow = rows.scale;
  const Decode<kOrder> decode{a.dec, a.shift};
  // The shift decode's values are 2^8 times the weights': 2^-8 goes into each block scale.
  constexpr float kDecodeScale = kOrder == Order::kPair ? 1.0f / 256.0f : 1.0f;
  // Past this call's rows the prefetch would fetch another thread's rows (or past the matrix):
  // wasted DRAM bandwidth, a pass per call (6% of 128 rows x 7168 at R = 8). There it fetches the
  // caller's next call's first rows when the caller said where they are, else re-touches the
  // rows being read.
  const uint8_t* pf = wrow[0] + a.ahead;
  if (pf + R * k_total > p.w.data + p.row_end * k_total) pf = p.prefetch_next ? p.prefetch_next : wrow[0];
  // Block totals: in registers while R * B <= 8 (with the accumulators, 16 ZMM), else in L1.
  constexpr bool kRegTotals = R * B <= 8;
  __m512 tot[kRegTotals ? R : 1][kRegTotals ? B : 1];
  alignas(64) float tot_l1[kRegTotals ? 1 : R][kRegTotals ? 1 : B][16];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      if constexpr (kRegTotals) tot[r][b] = _mm512_setzero_ps();
      else _mm512_store_ps(tot_l1[r][b], _mm512_setzero_ps());
    }

  for (int64_t kb = 0; kb < scale_cols; ++kb) {
    const int64_t k0 = kb * Fp8MatrixView::kBlock;
    const int64_t k1 = std::min(k_total, k0 + Fp8MatrixView::kBlock);
    __m512 acc[R][B];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_ps();
    int64_t k = k0;
    // Software prefetch into L2 of R lines per step from one pointer walking the weights `ahead`
    // bytes in front of row i0 (by default the next pass: R rows, read in the time of this one,
    // so short rows (K = 2048) stay fed too). One register, not R.
    auto prefetch = [&pf](int r) {
      if constexpr (kPf == Pf::kL1) _mm_prefetch(reinterpret_cast<const char*>(pf + r * 64), _MM_HINT_T0);
      else if constexpr (kPf == Pf::kL2) _mm_prefetch(reinterpret_cast<const char*>(pf + r * 64), _MM_HINT_T1);
    };
    for (; k + 64 <= k1; k += 64) {
      if constexpr (kRegTotals) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          prefetch(r);
          __m512i w0, w1;
          __m512i codes = _mm512_loadu_si512(wrow[r] + k);
          // Opaque to the compiler: keeps the codes in a register. Without it GCC 12 rebuilds
          // them for each destructive vpermi2b by a store and three reloads through the stack.
          asm("" : "+v"(codes));
          decode(codes, w0, w1);
#pragma GCC unroll 8
          for (int b = 0; b < B; ++b) {
            acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w0, (__m512bh)_mm512_loadu_si512(a.x[b] + k));
            acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w1, (__m512bh)_mm512_loadu_si512(a.x[b] + k + 32));
          }
        }
      } else {
        // R x B > 8 (batch 5..8): the R rows decoded first, then each batch row's two
        // activation vectors loaded once and used by all R rows. Rows outermost (above), GCC 12
        // hoisted all 2B activation vectors into registers beside the 2RB accumulators and
        // spilled accumulators to the stack every step (batch 8: 5 GB/s a core from L2).
        __m512i w[R][2];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          prefetch(r);
          __m512i codes = _mm512_loadu_si512(wrow[r] + k);
          asm("" : "+v"(codes));
          decode(codes, w[r][0], w[r][1]);
        }
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) {
          __m512i x0 = _mm512_loadu_si512(a.x[b] + k), x1 = _mm512_loadu_si512(a.x[b] + k + 32);
          asm("" : "+v"(x0), "+v"(x1));  // one load each, not one per row
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w[r][0], (__m512bh)x0);
            acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w[r][1], (__m512bh)x1);
          }
        }
      }
      pf += R * 64;
    }
    if (k < k1) {  // K not a multiple of 64: masked loads zero the missing lanes
      const int64_t n = k1 - k;
      const __mmask64 mw = _cvtu64_mask64((uint64_t{1} << n) - 1);
      const __mmask32 m0 = _cvtu32_mask32(n >= 32 ? ~0u : (1u << n) - 1u);
      const __mmask32 m1 = _cvtu32_mask32(n <= 32 ? 0u : (1u << (n - 32)) - 1u);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i w0, w1;
        decode(_mm512_maskz_loadu_epi8(mw, wrow[r] + k), w0, w1);
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) {
          // Lane order: the copy of x is zero-padded, and zero codes decode to +0.
          const __m512i x0 = kLaneOrder ? _mm512_load_si512(a.x[b] + k) : _mm512_maskz_loadu_epi16(m0, a.x[b] + k);
          const __m512i x1 = kLaneOrder ? _mm512_load_si512(a.x[b] + k + 32)
                                        : _mm512_maskz_loadu_epi16(m1, a.x[b] + k + 32);
          acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w0, (__m512bh)x0);
          acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w1, (__m512bh)x1);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(srow[r][kb] * kDecodeScale);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) {
        if constexpr (kRegTotals) tot[r][b] = _mm512_fmadd_ps(acc[r][b], s, tot[r][b]);
        else _mm512_store_ps(tot_l1[r][b], _mm512_fmadd_ps(acc[r][b], s, _mm512_load_ps(tot_l1[r][b])));
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      const __m512 t = kRegTotals ? tot[r][b] : _mm512_load_ps(tot_l1[r][b]);
      float sum = hsum512(t);
      if constexpr (kOrder == Order::kPair) sum += special_code_sum(p.w, i0 + r, p.x[b]);
      p.y[b][i0 + r] = sum * p.out_scale[b];
    }
}

// One 128-wide K block of one row at batch 1, from k0 to k1 (k1 - k0 <= 128): its accumulator,
// in the same order of operations as gemv_rows' (masked loads past a K that is not a multiple of 64).
template <Order kOrder, typename Dec>
__m512 block_sum(const Dec& decode, const uint8_t* w, const uint16_t* x, int64_t k0, int64_t k1) {
  constexpr bool kLaneOrder = kOrder != Order::kNatural;
  __m512 acc = _mm512_setzero_ps();
  int64_t k = k0;
  for (; k + 64 <= k1; k += 64) {
    __m512i w0, w1;
    __m512i codes = _mm512_loadu_si512(w + k);
    asm("" : "+v"(codes));
    decode(codes, w0, w1);
    acc = _mm512_dpbf16_ps(acc, (__m512bh)w0, (__m512bh)_mm512_loadu_si512(x + k));
    acc = _mm512_dpbf16_ps(acc, (__m512bh)w1, (__m512bh)_mm512_loadu_si512(x + k + 32));
  }
  if (k < k1) {
    const int64_t n = k1 - k;
    const __mmask32 m0 = _cvtu32_mask32(n >= 32 ? ~0u : (1u << n) - 1u);
    const __mmask32 m1 = _cvtu32_mask32(n <= 32 ? 0u : (1u << (n - 32)) - 1u);
    __m512i w0, w1;
    decode(_mm512_maskz_loadu_epi8(_cvtu64_mask64((uint64_t{1} << n) - 1), w + k), w0, w1);
    const __m512i x0 = kLaneOrder ? _mm512_load_si512(x + k) : _mm512_maskz_loadu_epi16(m0, x + k);
    const __m512i x1 = kLaneOrder ? _mm512_load_si512(x + k + 32) : _mm512_maskz_loadu_epi16(m1, x + k + 32);
    acc = _mm512_dpbf16_ps(acc, (__m512bh)w0, (__m512bh)x0);
    acc = _mm512_dpbf16_ps(acc, (__m512bh)w1, (__m512bh)x1);
  }
  return acc;
}

// Batch 1, rows start to end in turn (GemvPrefetch::row_blocks, row_streams): S rows at a time,
// one from each of S equal parts of the call's rows (S address streams, where gemv_rows reads R
// adjacent rows side by side), G K blocks of each at a time, each its own accumulator (S x G
// independent vdpbf16ps chains, as R rows' are in gemv_rows); a row's block totals are added in
// K-block order: bitwise gemv_rows' result.
template <int S, int G, Order kOrder, Pf kPf>
void gemv_row_streams(const Pass<1>& a, const int64_t (&row)[S]) {
  const Fp8GemvParams& p = a.p;
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  const uint16_t* x = a.x[0];
  const Decode<kOrder> decode{a.dec, a.shift};
  constexpr float kDecodeScale = kOrder == Order::kPair ? 1.0f / 256.0f : 1.0f;
  const uint8_t* w[S];
  const float* srow[S];
  const uint8_t* pf[S];
  __m512 tot[S];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    w[s] = p.w.data + row[s] * k_total;
    srow[s] = p.w.scale_inv + (row[s] / Fp8MatrixView::kBlock) * scale_cols;
    // As gemv_rows: past the call's rows, the caller's next rows or this row again.
    pf[s] = w[s] + a.ahead;
    if (pf[s] + k_total > p.w.data + p.row_end * k_total) pf[s] = p.prefetch_next ? p.prefetch_next : w[s];
    tot[s] = _mm512_setzero_ps();
  }
  constexpr int64_t kBlk = Fp8MatrixView::kBlock;
  int64_t kb = 0;
  for (; kb + G <= k_total / kBlk; kb += G) {
    __m512 acc[S][G];
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s)
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) acc[s][g] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kBlk; k += 64) {
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          if constexpr (kPf == Pf::kL1) _mm_prefetch(reinterpret_cast<const char*>(pf[s] + g * 64), _MM_HINT_T0);
          else if constexpr (kPf == Pf::kL2) _mm_prefetch(reinterpret_cast<const char*>(pf[s] + g * 64), _MM_HINT_T1);
          const int64_t kk = (kb + g) * kBlk + k;
          __m512i w0, w1;
          __m512i codes = _mm512_loadu_si512(w[s] + kk);
          asm("" : "+v"(codes));
          decode(codes, w0, w1);
          acc[s][g] = _mm512_dpbf16_ps(acc[s][g], (__m512bh)w0, (__m512bh)_mm512_loadu_si512(x + kk));
          acc[s][g] = _mm512_dpbf16_ps(acc[s][g], (__m512bh)w1, (__m512bh)_mm512_loadu_si512(x + kk + 32));
        }
        pf[s] += G * 64;
      }
    }
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s)
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g)
        tot[s] = _mm512_fmadd_ps(acc[s][g], _mm512_set1_ps(srow[s][kb + g] * kDecodeScale), tot[s]);
  }
  for (; kb < scale_cols; ++kb) {
    const int64_t k0 = kb * kBlk;
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const __m512 acc = block_sum<kOrder>(decode, w[s], x, k0, std::min(k_total, k0 + kBlk));
      tot[s] = _mm512_fmadd_ps(acc, _mm512_set1_ps(srow[s][kb] * kDecodeScale), tot[s]);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    float sum = hsum512(tot[s]);
    if constexpr (kOrder == Order::kPair) sum += special_code_sum(p.w, row[s], p.x[0]);
    p.y[0][row[s]] = sum * p.out_scale[0];
  }
}

// The call's rows by gemv_row_streams<S, G>: S equal parts read side by side, then the rows
// left over (fewer than S) one at a time.
template <int S, int G, Order kOrder, Pf kPf>
void gemv_rows_in_turn(const Pass<1>& a) {
  const int64_t begin = a.p.row_begin, part = (a.p.row_end - begin) / S;
  for (int64_t t = 0; t < part; ++t) {
    int64_t row[S];
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) row[s] = begin + s * part + t;
    gemv_row_streams<S, G, kOrder, kPf>(a, row);
  }
  for (int64_t i = begin + S * part; i < a.p.row_end; ++i) {
    const int64_t row[1] = {i};
    gemv_row_streams<1, G, kOrder, kPf>(a, row);
  }
}

// Prefetch into L1 (T0) at batch 1-2 when the pass ahead is small enough to sit in L1 beside the
// one being read (short rows: 8 x 2048 at batch 1, 4 x 2048 at batch 2) and GemvPrefetch::l1_bytes
// allows it, else into L2 (T1). Measured on Zen 5 at 2 threads, 7168x2048, 8 rows side by side:
// T0 0.81-0.83 of the probe at batch 1 against 0.75-0.78 for T1, 0.75-0.76 against 0.68-0.70 at
// batch 2; but T0 at batch 4 on 2048x7168 (2 x 7168 ahead, beside 57 KB of activations in L1) fell
// from 0.51-0.60 to 0.31, and with rows in turn (AMD's default then) T0 lost at batch 1 as well
// (0.57-0.71 against 0.88-0.92): the default is l1_bytes = 0, T1 always.
template <int B>
bool prefetch_into_l1(const Pass<B>& a) {
  return B <= 2 && a.ahead <= a.l1_bytes;
}

template <int B, Order kOrder>
void gemv_passes(const Pass<B>& a) {
  auto run = [&a]<Pf kPf>() {
    if constexpr (B == 1) {
      switch (a.row_blocks * 10 + a.row_streams) {  // GemvPrefetch: row_streams x row_blocks <= 8
        case 41: return gemv_rows_in_turn<1, 4, kOrder, kPf>(a);
        case 81: return gemv_rows_in_turn<1, 8, kOrder, kPf>(a);
        case 42: return gemv_rows_in_turn<2, 4, kOrder, kPf>(a);
        case 24: return gemv_rows_in_turn<4, 2, kOrder, kPf>(a);
        default: break;
      }
    }
    for_row_passes<gemv_rows_per_pass(B)>(a.p.row_begin, a.p.row_end,
                                          [&a]<int R>(int64_t i) { gemv_rows<B, R, kOrder, kPf>(a, i); });
  };
  if (a.ahead == 0) run.template operator()<Pf::kNone>();
  else if (prefetch_into_l1(a)) run.template operator()<Pf::kL1>();
  else run.template operator()<Pf::kL2>();
}

// A call's first pass has no pass before it to prefetch it: without this its rows came in by
// demand misses (one pass in 16 of a 128-row call of 2048x7168, the whole of a 4-pass MoE
// gate/up task's first quarter). Issued before the activation copy, which overlaps the latency.
template <int B>
void prefetch_first_pass(const Pass<B>& a) {
  const Fp8GemvParams& p = a.p;
  const int64_t rows = std::min<int64_t>(gemv_rows_per_pass(B), p.row_end - p.row_begin);
  const char* first = reinterpret_cast<const char*>(p.w.data + p.row_begin * p.w.cols);
  const int64_t n = rows * p.w.cols;
  if (prefetch_into_l1(a)) {
    for (int64_t o = 0; o < n; o += 64) _mm_prefetch(first + o, _MM_HINT_T0);
  } else {
    for (int64_t o = 0; o < n; o += 64) _mm_prefetch(first + o, _MM_HINT_T1);
  }
}

// The calling thread's pair-order copy of x.
uint16_t* pair_order_buffer(int64_t words) {
  thread_local GrowingBuffer<uint16_t> buf;
  return buf.at_least(words);
}

template <int B>
void gemv_batch(const Fp8GemvParams& p) {
  const Fp8Bf16Decoder dec;
  const Fp8ShiftDecoder shift;
  const GemvPrefetch pf = gemv_prefetch();
  Pass<B> a{p, dec, shift, {}, pf.distance >= 0 ? pf.distance : gemv_rows_per_pass(B) * p.w.cols, pf.l1_bytes, pf.row_blocks, pf.row_streams};
  if (pf.first_pass && a.ahead != 0) prefetch_first_pass(a);
  const int64_t padded = (p.w.cols + 63) / 64 * 64;
  if (p.w.specials) {  // shift decode: x in pair order, each row corrected for its special codes
    uint16_t* xbuf = pair_order_buffer(B * padded);
    for (int b = 0; b < B; ++b) {
      bf16_to_order(p.x[b], p.w.cols, xbuf + b * padded, kPairOrderFirst, kPairOrderSecond);
      a.x[b] = xbuf + b * padded;
    }
    return gemv_passes<B, Order::kPair>(a);
  }
  if (B * padded > kGemvLaneOrderWords) {  // too long to copy on the stack: natural order
    for (int b = 0; b < B; ++b) a.x[b] = p.x[b];
    return gemv_passes<B, Order::kNatural>(a);
  }
  // One copy of x in lane order per call (B * K words, small next to the rows' weights).
  alignas(64) uint16_t xbuf[kGemvLaneOrderWords];
  for (int b = 0; b < B; ++b) {
    bf16_to_lane_order(p.x[b], p.w.cols, xbuf + b * padded);
    a.x[b] = xbuf + b * padded;
  }
  gemv_passes<B, Order::kLane>(a);
}

}  // namespace

void fp8_gemv_avx512bf16(const Fp8GemvParams& p) {
  with_gemv_batch(p.batch, [&p]<int B>() { gemv_batch<B>(p); });
}

void fp8_to_bf16_avx512bf16(const uint8_t* src, uint16_t* dst, size_t n) {
  const Fp8Bf16Decoder dec;
  for (size_t i = 0; i < n; i += 64) {
    const size_t left = n - i;
    const __mmask64 m = _cvtu64_mask64(left >= 64 ? ~uint64_t{0} : (uint64_t{1} << left) - 1);
    __m512i w0, w1;
    dec(_mm512_maskz_loadu_epi8(m, src + i), w0, w1);
    _mm512_mask_storeu_epi16(dst + i, _cvtu32_mask32(left >= 32 ? ~0u : (1u << left) - 1u), w0);
    if (left > 32) {
      _mm512_mask_storeu_epi16(dst + i + 32,
                               _cvtu32_mask32(left >= 64 ? ~0u : (1u << (left - 32)) - 1u), w1);
    }
  }
}

}  // namespace hymoe::kernels::detail
