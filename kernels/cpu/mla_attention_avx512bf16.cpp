// MLA attention, AVX512-BF16 variant. Per key block of 64 positions, for tiles of 4 query rows:
//  - scores: 4 rows x 4 keys of vdpbf16ps accumulators along the 576 values, straight from the
//    cache rows (no packing), reduced 16 -> 1 vector by a shuffle tree;
//  - online softmax in registers (exp2 by polynomial and vscalefps), weights p rounded to BF16;
//  - o_lat += P V: the block's c_kv rows interleaved in key pairs once per call (v_packed), so one
//    vdpbf16ps adds two keys' contributions to 16 columns; 4 rows x 64 columns per pass.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "mla_attention_layout.h"
#include "mla_avx512_math.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

constexpr int kRows = 4;  // query rows per tile
constexpr int64_t kB = kMlaKeyBlock;
constexpr int64_t kGroupRows = 128;  // 256 KB of o_lat at lora 512

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }
inline __m512bh load_bh(const uint16_t* p) { return as_bh(_mm512_loadu_si512(p)); }

// Interleaves the c_kv rows of a block in key pairs: vp[(i * lora + c) * 2 + e] = row[2i + e][c].
void pack_v(const uint16_t* const* krow, int64_t pairs, int64_t lora, uint16_t* vp) {
  alignas(64) uint16_t lo_idx[32], hi_idx[32];
  for (int j = 0; j < 16; ++j) {
    lo_idx[2 * j] = static_cast<uint16_t>(j);
    lo_idx[2 * j + 1] = static_cast<uint16_t>(32 + j);
    hi_idx[2 * j] = static_cast<uint16_t>(16 + j);
    hi_idx[2 * j + 1] = static_cast<uint16_t>(48 + j);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int64_t i = 0; i < pairs; ++i) {
    const uint16_t* a = krow[2 * i];
    const uint16_t* b = krow[2 * i + 1];
    uint16_t* dst = vp + i * lora * 2;
    for (int64_t c = 0; c < lora; c += 32) {
      const __m512i va = _mm512_loadu_si512(a + c), vb = _mm512_loadu_si512(b + c);
      _mm512_storeu_si512(dst + c * 2, _mm512_permutex2var_epi16(va, lo, vb));
      _mm512_storeu_si512(dst + c * 2 + 32, _mm512_permutex2var_epi16(va, hi, vb));
    }
  }
}

// Scores of 4 rows x 4 keys: lane r * 4 + k of the result.
inline __m512 scores_4x4(const uint16_t* q, int64_t width, const uint16_t* const* k) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < width; c += 32) {
    __m512bh kv[4], qv[kRows];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) kv[j] = load_bh(k[j] + c);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) qv[r] = load_bh(q + r * width + c);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r * 4 + j] = _mm512_dpbf16_ps(acc[r * 4 + j], qv[r], kv[j]);
  }
  return reduce16(acc);
}

}  // namespace

void mla_attention_avx512bf16(const MlaAttentionParams& p, MlaAttentionScratch& sc) {
  const MlaRows rows(p);
  const int64_t lora = p.lora, width = p.lora + p.rope, kv_len = mla_kv_len(p);
  if (static_cast<int64_t>(sc.m.size()) < rows.count) {
    sc.m.resize(static_cast<size_t>(rows.count));
    sc.l.resize(static_cast<size_t>(rows.count));
  }
  if (static_cast<int64_t>(sc.v_packed.size()) < kB * lora) sc.v_packed.resize(static_cast<size_t>(kB * lora));
  if (static_cast<int64_t>(sc.zero_row.size()) < width) sc.zero_row.assign(static_cast<size_t>(width), 0);
  if (static_cast<int64_t>(sc.q_tile.size()) < kRows * width) sc.q_tile.resize(static_cast<size_t>(kRows * width));
  uint16_t* vp = sc.v_packed.data();
  uint16_t* qt = sc.q_tile.data();
  const __m512 sl2 = _mm512_set1_ps(p.scale * 1.4426950408889634f);
  const uint16_t* krow[kB];
  alignas(64) float s[kRows][kB];
  alignas(64) int32_t pb32[kRows][kB / 2];  // the BF16 weights p of a tile, as key pairs
  float* o[kRows];

  // Row groups whose o_lat (kGroupRows x lora FP32) stays in L2 across the key blocks; a decode
  // call (one token, <= 128 heads) is one group, so it reads each cache row once.
  for (int64_t g0 = 0; g0 < rows.count; g0 += kGroupRows) {
    const int64_t g1 = std::min(rows.count, g0 + kGroupRows);
    const int64_t g_len = std::min(kv_len, rows.position(p, g1 - 1) + 1);  // keys the group sees
    for (int64_t b0 = 0; b0 < g_len; b0 += kB) {
      const int64_t nb = std::min(kB, g_len - b0);
      for (int64_t k = 0; k < kB; ++k) krow[k] = k < nb ? mla_cache_row(p, b0 + k) : sc.zero_row.data();
      pack_v(krow, (nb + 1) / 2, lora, vp);
      for (int64_t i0 = g0; i0 < g1; i0 += kRows) {
        const int64_t nr = std::min<int64_t>(kRows, g1 - i0);
        int64_t valid[kRows];  // keys of this block the row sees (0: the row sits before it)
        int64_t most = 0;
        for (int r = 0; r < kRows; ++r) {
          valid[r] = r < nr ? std::clamp<int64_t>(rows.position(p, i0 + r) - b0 + 1, 0, nb) : 0;
          most = std::max(most, valid[r]);
        }
        if (most == 0) continue;
        // The tile's queries in BF16 (rows past the call's end: zeros, never stored).
        for (int r = 0; r < kRows; ++r) {
          uint16_t* dst = qt + r * width;
          if (r >= nr) {
            std::memset(dst, 0, static_cast<size_t>(width) * sizeof(uint16_t));
            continue;
          }
          o[r] = rows.out(p, i0 + r);
          const float* src[2] = {rows.q_lat(p, i0 + r), rows.q_pe(p, i0 + r)};
          const int64_t len[2] = {lora, p.rope};
          for (int part = 0; part < 2; ++part) {
            for (int64_t c = 0; c < len[part]; c += 32) {
              const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src[part] + c + 16), _mm512_loadu_ps(src[part] + c));
              _mm512_storeu_si512(dst + (part ? lora : 0) + c, (__m512i)v);
            }
          }
        }
        // Scores, 4 keys at a time.
        for (int64_t g = 0; g < most; g += 4) {
          store_scores_4x4(scores_4x4(qt, width, krow + g), s, g);
        }
        // Online softmax per row; p to BF16.
        float alpha[kRows];
        for (int r = 0; r < kRows; ++r) {
          if (valid[r] == 0) {
            std::memset(pb32[r], 0, sizeof(pb32[r]));
            continue;
          }
          __m512 e[4];
          alpha[r] = softmax_block_row(&s[r][0], valid[r], sl2, b0 == 0, sc.m[static_cast<size_t>(i0 + r)],
                                       sc.l[static_cast<size_t>(i0 + r)], e);
          _mm512_store_si512(&pb32[r][0], (__m512i)_mm512_cvtne2ps_pbh(e[1], e[0]));
          _mm512_store_si512(&pb32[r][16], (__m512i)_mm512_cvtne2ps_pbh(e[3], e[2]));
        }
        // o = o * alpha + P V, 64 columns of the 4 rows at a time (4 x 4 accumulators: 8 loads
        // per 16 vdpbf16ps; 8 rows x 2 vectors measured 1.5x slower here, load-bound).
        const int64_t pairs = (most + 1) / 2;
        for (int64_t c0 = 0; c0 < lora; c0 += 64) {
          __m512 acc[kRows][4];
#pragma GCC unroll 4
          for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) {
              acc[r][v] = b0 == 0 || valid[r] == 0 ? _mm512_setzero_ps()
                                                    : _mm512_mul_ps(_mm512_loadu_ps(o[r] + c0 + 16 * v), _mm512_set1_ps(alpha[r]));
            }
          }
          for (int64_t i = 0; i < pairs; ++i) {
            __m512bh vv[4];
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) vv[v] = load_bh(vp + (i * lora + c0 + 16 * v) * 2);
#pragma GCC unroll 4
            for (int r = 0; r < kRows; ++r) {
              const __m512bh pr = as_bh(_mm512_set1_epi32(pb32[r][i]));
#pragma GCC unroll 4
              for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], vv[v], pr);
            }
          }
#pragma GCC unroll 4
          for (int r = 0; r < kRows; ++r) {
            if (valid[r] == 0) continue;
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) _mm512_storeu_ps(o[r] + c0 + 16 * v, acc[r][v]);
          }
        }
      }
    }
  }
  normalize_rows(p, rows, sc.l.data(), lora);
}

}  // namespace hymoe::kernels::detail
