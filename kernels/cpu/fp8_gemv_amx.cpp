// FP8 GEMV, AMX-BF16 variant (Sapphire Rapids and later): the weights are the A operand. Each
// group of 16 rows is decoded 64 codes a row at a time by the AVX512-BF16 variant's table lookup
// (Fp8Bf16Decoder::lane_order) into 16 x 32 BF16 A tiles in L1 (1 KB each, four a 128-wide K
// block), and tdpbf16ps multiplies them with B tiles of the activations: 16 K pairs x `batch`
// tokens, built once per call from the activations in the same lane order (transposed so that a
// tile row is one K pair of every token). One 16 x batch FP32 C tile per K block; its sums are
// stored packed ([row][token], 16 x batch floats: `batch` vectors) and post-scaled into as many
// register totals by the block scale of each element's row (one broadcast where the group's 16
// rows share a 128-row scale block, as they do for 16-aligned row ranges; else a blend of the
// two blocks' scales): per element the same FMA as one total per row, so bitwise the same sums.
// The K blocks are
// software-pipelined (see the loop). The dot products run on the tile unit, so the batch costs
// next to nothing beyond batch 1 (vdpbf16ps, one per 32 weights per token, bounds the
// AVX512-BF16 variant from batch 2 on); the decode is the same. Each output depends only on its
// own row and token, so rows are bitwise the same at every batch size and under any row split.
#include <immintrin.h>

#include <algorithm>

#include "amx_tiles.h"
#include "fp8_decode_avx512.h"
#include "gemm_avx512bf16_kernel.h"  // transpose16x16_epi32
#include "growing_buffer.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

constexpr int kRows = 16;  // rows of a group: the tiles' M
// Tiles: 0, 1 = C (16 rows x batch FP32), 2..5 = A (16 rows x 32 BF16), 6, 7 = B (16 K pairs x
// batch).
TileConfig gemv_tile_config(int batch) {
  TileConfig cfg;
  cfg.set(0, kRows, 4 * batch);
  cfg.set(1, kRows, 4 * batch);
  for (int t = 2; t <= 5; ++t) cfg.set(t, kRows, 64);
  cfg.set(6, 16, 4 * batch);
  cfg.set(7, 16, 4 * batch);
  return cfg;
}

// B operand of all 32-wide K steps: xb[(16 s + kp) * batch + t] = the BF16 pair kp of step s of
// token t in lane order, i.e. the [K / 2][batch] transpose of the lane-order rows as 32-bit pairs.
// At batch 1 that is the lane-order row itself.
void build_b(const Fp8GemvParams& p, int64_t padded, uint16_t* lane, uint32_t* xb) {
  const int batch = p.batch;
  if (batch == 1) return bf16_to_lane_order(p.x[0], p.w.cols, reinterpret_cast<uint16_t*>(xb));
  for (int b = 0; b < batch; ++b) bf16_to_lane_order(p.x[b], p.w.cols, lane + b * padded);
  const int64_t pairs = padded / 2;
  for (int64_t j = 0; j < pairs; j += 16) {  // 16 pairs of every token -> 16 rows of `batch`
    __m512i r[16];
#pragma GCC unroll 16
    for (int b = 0; b < 16; ++b)
      r[b] = b < batch ? _mm512_load_si512(reinterpret_cast<const uint32_t*>(lane + b * padded) + j)
                       : _mm512_setzero_si512();
    transpose16x16_epi32(r);
    const __mmask16 m = static_cast<__mmask16>((1u << batch) - 1u);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) _mm512_mask_storeu_epi32(xb + (j + i) * batch, m, r[i]);
  }
}

// One thread's activation buffers (lane order, and the B tiles: words / 2 32-bit K pairs).
struct AmxGemvScratch {
  GrowingBuffer<uint16_t> lane;
  GrowingBuffer<uint32_t> xb;
};

}  // namespace

void fp8_gemv_amx(const Fp8GemvParams& p) {
  if (p.row_begin == p.row_end) return;
  const int batch = p.batch;
  const int64_t k_total = p.w.cols, padded = (k_total + 63) / 64 * 64;
  // Activations in lane order, then as B tiles (2 x batch x K words, per-thread scratch).
  thread_local AmxGemvScratch scratch;
  const int64_t words = batch * padded;
  uint32_t* xb = scratch.xb.at_least((words + 1) / 2);
  build_b(p, padded, scratch.lane.at_least(words), xb);

  const Fp8Bf16Decoder dec;
  const AmxGemvPrefetch pf = amx_gemv_prefetch();
  const bool l2_prefetch = pf.groups_ahead > 0;
  const TileScope tiles(gemv_tile_config(batch));
  const int64_t kblocks = p.w.scale_cols();
  // Software-pipelined over K blocks: iteration kb decodes block kb + 1 into the other A buffer,
  // runs block kb's tiles, and post-scales block kb - 1's stored sums. So a buffer's stores have
  // a whole decode to drain before its tile loads read them, and a C tile's store before its
  // sums are read (no store forwarding into or out of the tiles).
  alignas(64) uint16_t a[2][2][2][kRows * 32];  // [K block parity][half][tile][row * 32 + k]
  alignas(64) float c[2][kRows * kMaxGemvBatch] = {};  // [row][token], packed
  for (int64_t r0 = p.row_begin; r0 < p.row_end; r0 += kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, p.row_end - r0));
    // The group's weight rows and block-scale rows; rows past its end read the last row with an
    // all-zero mask (zero codes; their outputs are never stored).
    const uint8_t* wr[kRows];
    const float* sr[kRows];
    uint64_t live[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = r0 + std::min(r, rows - 1);
      wr[r] = p.w.data + i * k_total;
      sr[r] = p.w.scale_inv + (i / Fp8MatrixView::kBlock) * p.w.scale_cols();
      live[r] = r < rows ? ~uint64_t{0} : 0;
    }
    // pf.groups_ahead groups ahead, but not past the call's last group (another thread's rows,
    // or past the matrix: DRAM bandwidth spent for nothing; prefetches never fault): the last
    // groups prefetch as far as that group, the last one re-touches its own rows.
    const int64_t groups_left = (p.row_end - r0 - 1) / kRows;
    const int64_t ahead = std::min<int64_t>(pf.groups_ahead, groups_left) * kRows * k_total;
    // Block kb's codes of the group, decoded into a[kb % 2].
    auto decode = [&](int64_t kb) {
      for (int h = 0; h < 2; ++h) {
        const int64_t k = kb * Fp8MatrixView::kBlock + 64 * h;
        if (k >= k_total) break;
        const int64_t left = k_total - k;
        const uint64_t mk = left >= 64 ? ~uint64_t{0} : (uint64_t{1} << left) - 1;
        uint16_t(&dst)[2][kRows * 32] = a[kb % 2][h];
#pragma GCC unroll 16
        for (int r = 0; r < kRows; ++r) {
          // A later group's same bytes into L2 (by default the next: one pass ahead, as the
          // AVX512-BF16 variant), and this row's bytes ahead into L1: 16 streams are too many for
          // the L1 prefetcher to follow alone.
          if (l2_prefetch) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + k + ahead), _MM_HINT_T1);
          if (pf.l1_ahead) _mm_prefetch(reinterpret_cast<const char*>(wr[r] + k + pf.l1_ahead), _MM_HINT_T0);
          __m512i codes = _mm512_maskz_loadu_epi8(_cvtu64_mask64(mk & live[r]), wr[r] + k);
          // Opaque to the compiler, as in the AVX512-BF16 variant: keeps the codes in a register
          // (GCC 12 otherwise rebuilds them through the stack for each destructive vpermi2b).
          asm("" : "+v"(codes));
          __m512i w0, w1;
          dec.lane_order(codes, w0, w1);
          _mm512_store_si512(dst[0] + r * 32, w0);
          _mm512_store_si512(dst[1] + r * 32, w1);
        }
      }
    };
    // Totals: element e = r * batch + t of the group's [row][token] sums in lane e % 16 of tot[e /
    // 16]. Rows of the last row's scale block (when the group straddles two) by lane mask.
    __m512 tot[kMaxGemvBatch];
    __mmask16 second[kMaxGemvBatch];
    const float* s_first = sr[0];
    const float* s_second = sr[kRows - 1];
#pragma GCC unroll 8
    for (int v = 0; v < kMaxGemvBatch; ++v) {
      tot[v] = _mm512_setzero_ps();
      unsigned m = 0;
      if (s_second != s_first)  // the group straddles two scale blocks (a row range not 16-aligned)
        for (int lane = 0; lane < 16; ++lane)
          if (sr[std::min(kRows - 1, (16 * v + lane) / batch)] != s_first) m |= 1u << lane;
      second[v] = static_cast<__mmask16>(m);
    }
    auto post_scale = [&](int64_t kb) {
      const __m512 s0 = _mm512_set1_ps(s_first[kb]), s1 = _mm512_set1_ps(s_second[kb]);
#pragma GCC unroll 8
      for (int v = 0; v < kMaxGemvBatch; ++v) {
        if (v >= batch) break;
        tot[v] = _mm512_fmadd_ps(_mm512_load_ps(c[kb % 2] + 16 * v), _mm512_mask_blend_ps(second[v], s0, s1),
                                 tot[v]);
      }
    };
    // Block kb's products into C tile kb % 2 (A tiles 2, 3 for the first half, 4, 5 for the
    // second), stored to c[kb % 2]. The tile numbers of these intrinsics are literals.
#define HYMOE_AMX_HALF(C, A0, A1, H)                                                  \
  {                                                                                   \
    const int64_t step = (k0 + 64 * (H)) / 32; /* lane order: w0 step 2q, w1 2q + 1 */ \
    _tile_loadd(A0, a[kb % 2][H][0], 64);                                             \
    _tile_loadd(6, xb + step * 16 * batch, 4 * batch);                                \
    _tile_dpbf16ps(C, A0, 6);                                                         \
    _tile_loadd(A1, a[kb % 2][H][1], 64);                                             \
    _tile_loadd(7, xb + (step + 1) * 16 * batch, 4 * batch);                          \
    _tile_dpbf16ps(C, A1, 7);                                                         \
  }
#define HYMOE_AMX_BLOCK(C)                                     \
  {                                                            \
    _tile_zero(C);                                             \
    HYMOE_AMX_HALF(C, 2, 3, 0)                                 \
    if (k0 + 64 < k_total) HYMOE_AMX_HALF(C, 4, 5, 1)          \
    _tile_stored(C, c[kb % 2], 4 * batch);                     \
  }
    decode(0);
    for (int64_t kb = 0; kb < kblocks; ++kb) {
      const int64_t k0 = kb * Fp8MatrixView::kBlock;
      if (kb + 1 < kblocks) decode(kb + 1);
      if (kb % 2) HYMOE_AMX_BLOCK(1) else HYMOE_AMX_BLOCK(0)
      if (kb > 0) post_scale(kb - 1);
    }
    post_scale(kblocks - 1);
#undef HYMOE_AMX_BLOCK
#undef HYMOE_AMX_HALF
    alignas(64) float out[kRows * kMaxGemvBatch];
#pragma GCC unroll 8
    for (int v = 0; v < kMaxGemvBatch; ++v) _mm512_store_ps(out + 16 * v, tot[v]);
    for (int r = 0; r < rows; ++r)
      for (int b = 0; b < batch; ++b) p.y[b][r0 + r] = out[r * batch + b] * p.out_scale[b];
  }
}

}  // namespace hymoe::kernels::detail
