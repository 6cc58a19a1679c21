// MLA attention, AVX-512F variant (CPUs without vdpbf16ps): the key blocks, tiles and online
// softmax of the AVX512-BF16 variant with FP32 FMAs on the cache rows widened exactly (a 16-bit
// shift): scores of 4 rows x 4 keys reduced by the same shuffle tree; o_lat += p v one key at a
// time straight from the cache rows (no packing), p kept in FP32. q is rounded to BF16 as the
// contract says (like the other variants).
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

constexpr int kRows = 4;
constexpr int64_t kB = kMlaKeyBlock;
constexpr int64_t kGroupRows = 128;

inline __m512 widen(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

// FP32 -> nearest BF16 (ties to even) -> FP32, for finite inputs.
inline __m512 round_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd);
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

inline __m512 scores_4x4(const float* q, int64_t width, const uint16_t* const* k) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < width; c += 16) {
    __m512 kv[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) kv[j] = widen(k[j] + c);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m512 qv = _mm512_loadu_ps(q + r * width + c);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r * 4 + j] = _mm512_fmadd_ps(qv, kv[j], acc[r * 4 + j]);
    }
  }
  return reduce16(acc);
}

}  // namespace

void mla_attention_avx512(const MlaAttentionParams& p, MlaAttentionScratch& sc) {
  const MlaRows rows(p);
  const int64_t lora = p.lora, width = p.lora + p.rope, kv_len = mla_kv_len(p);
  if (static_cast<int64_t>(sc.m.size()) < rows.count) {
    sc.m.resize(static_cast<size_t>(rows.count));
    sc.l.resize(static_cast<size_t>(rows.count));
  }
  if (static_cast<int64_t>(sc.zero_row.size()) < width) sc.zero_row.assign(static_cast<size_t>(width), 0);
  if (static_cast<int64_t>(sc.q_row.size()) < kRows * width) sc.q_row.resize(static_cast<size_t>(kRows * width));
  float* qt = sc.q_row.data();
  const __m512 sl2 = _mm512_set1_ps(p.scale * 1.4426950408889634f);
  const uint16_t* krow[kB];
  alignas(64) float s[kRows][kB];
  float* o[kRows];

  for (int64_t g0 = 0; g0 < rows.count; g0 += kGroupRows) {
    const int64_t g1 = std::min(rows.count, g0 + kGroupRows);
    const int64_t g_len = std::min(kv_len, rows.position(p, g1 - 1) + 1);
    for (int64_t b0 = 0; b0 < g_len; b0 += kB) {
      const int64_t nb = std::min(kB, g_len - b0);
      for (int64_t k = 0; k < kB; ++k) krow[k] = k < nb ? mla_cache_row(p, b0 + k) : sc.zero_row.data();
      for (int64_t i0 = g0; i0 < g1; i0 += kRows) {
        const int64_t nr = std::min<int64_t>(kRows, g1 - i0);
        int64_t valid[kRows];
        int64_t most = 0;
        for (int r = 0; r < kRows; ++r) {
          valid[r] = r < nr ? std::clamp<int64_t>(rows.position(p, i0 + r) - b0 + 1, 0, nb) : 0;
          most = std::max(most, valid[r]);
        }
        if (most == 0) continue;
        for (int r = 0; r < kRows; ++r) {
          float* dst = qt + r * width;
          if (r >= nr) {
            std::memset(dst, 0, static_cast<size_t>(width) * sizeof(float));
            continue;
          }
          o[r] = rows.out(p, i0 + r);
          const float* ql = rows.q_lat(p, i0 + r);
          const float* qp = rows.q_pe(p, i0 + r);
          for (int64_t c = 0; c < lora; c += 16) _mm512_storeu_ps(dst + c, round_bf16(_mm512_loadu_ps(ql + c)));
          for (int64_t c = 0; c < p.rope; c += 16) _mm512_storeu_ps(dst + lora + c, round_bf16(_mm512_loadu_ps(qp + c)));
        }
        for (int64_t g = 0; g < most; g += 4) {
          store_scores_4x4(scores_4x4(qt, width, krow + g), s, g);
        }
        // Online softmax; s[r] becomes the weights p (0 past the row's keys).
        float alpha[kRows];
        for (int r = 0; r < kRows; ++r) {
          if (valid[r] == 0) {
            std::memset(s[r], 0, sizeof(s[r]));
            continue;
          }
          __m512 e[4];
          alpha[r] = softmax_block_row(&s[r][0], valid[r], sl2, b0 == 0, sc.m[static_cast<size_t>(i0 + r)],
                                       sc.l[static_cast<size_t>(i0 + r)], e);
          for (int v = 0; v < 4; ++v) _mm512_store_ps(&s[r][16 * v], e[v]);
        }
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
          for (int64_t k = 0; k < most; ++k) {
            __m512 vv[4];
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) vv[v] = widen(krow[k] + c0 + 16 * v);
#pragma GCC unroll 4
            for (int r = 0; r < kRows; ++r) {
              const __m512 pr = _mm512_set1_ps(s[r][k]);
#pragma GCC unroll 4
              for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(vv[v], pr, acc[r][v]);
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
