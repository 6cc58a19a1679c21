// FP8 GEMM, AMX-BF16 (Sapphire Rapids and later): the same panels as the AVX512-BF16 GEMM, with
// 32 x 32 blocks of C computed by four 16 x 16 FP32 tiles (tmm0-3) from two X tiles (tmm4-5,
// loaded straight from X) and two panel tiles (tmm6-7). Each 128-wide K block's tile sums are
// stored, post-scaled and added into C. Row tails (< 32 rows) run through the same tiles from a
// zero-padded copy of their X rows, so that a row's result does not depend on how many rows
// share the call (batch invariance); K blocks that are not a multiple of 32 wide use the
// AVX512-BF16 micro-kernel for every row.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gemm_avx512bf16_kernel.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Loads the tile configuration on construction and releases the tile state on destruction.
class TileScope {
 public:
  TileScope() {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) {
      cfg.colsb[t] = 64;
      cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
  }
  ~TileScope() { _tile_release(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

// C[m0 .. m0+rows)[n0 .. n0+ncols) (+)= scale * X[0..rows)[k0..k1) . panel, X rows from `x`
// (32 readable rows of stride x_stride, column k at x[k - k0]); (k1 - k0) % 32 == 0, rows <= 32.
void block32(const Fp8GemmParams& p, const uint16_t* x, int64_t x_stride, int rows,
             const uint32_t* panel, int64_t m0, int64_t n0, int64_t k0, int64_t k1, int64_t ncols,
             float scale, bool first, float* tmp) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int64_t xs = x_stride * 2;
  for (int64_t k = k0; k < k1; k += 32) {
    const uint32_t* b = panel + ((k - k0) / 2) * kGemmPanelN;
    _tile_loadd(4, x + (k - k0), xs);
    _tile_loadd(5, x + 16 * x_stride + (k - k0), xs);
    _tile_loadd(6, b, kGemmPanelN * 4);
    _tile_loadd(7, b + 16, kGemmPanelN * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, tmp, 128);
  _tile_stored(1, tmp + 16, 128);
  _tile_stored(2, tmp + 16 * 32, 128);
  _tile_stored(3, tmp + 16 * 32 + 16, 128);
  const __m512 s = _mm512_set1_ps(scale);
  const __mmask16 m0k = ncols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << ncols) - 1u);
  const __mmask16 m1k = ncols >= 32 ? __mmask16(0xFFFF)
                        : ncols <= 16 ? __mmask16(0)
                                      : __mmask16((1u << (ncols - 16)) - 1u);
  for (int i = 0; i < rows; ++i) {
    float* c = p.c + (m0 + i) * p.c_stride + n0;
    __m512 v0, v1;  // explicit FMA, as in the AVX512-BF16 micro-kernel
    if (first) {
      v0 = _mm512_mul_ps(_mm512_load_ps(tmp + i * 32), s);
      v1 = _mm512_mul_ps(_mm512_load_ps(tmp + i * 32 + 16), s);
    } else {
      v0 = _mm512_fmadd_ps(_mm512_load_ps(tmp + i * 32), s, _mm512_maskz_loadu_ps(m0k, c));
      v1 = _mm512_fmadd_ps(_mm512_load_ps(tmp + i * 32 + 16), s, _mm512_maskz_loadu_ps(m1k, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0k, v0);
    _mm512_mask_storeu_ps(c + 16, m1k, v1);
  }
}

}  // namespace

void fp8_gemm_amx(const Fp8GemmParams& p) {
  const TileScope tiles;
  const Fp8Bf16Decoder dec;
  alignas(64) uint32_t panel[kGemmPanelPairs * kGemmPanelN];
  alignas(64) float tmp[32 * 32];
  alignas(64) uint16_t xpad[32 * Fp8Matrix::kBlock];  // a row tail's X block, zero-padded
  const int64_t k_total = p.w.cols;
  for (int64_t mc = 0; mc < p.m; mc += kAmxChunkM) {
    const int64_t mc_end = std::min(p.m, mc + kAmxChunkM);
    for (int64_t n0 = p.n_begin; n0 < p.n_end; n0 += kGemmPanelN) {
      const int64_t ncols = std::min<int64_t>(kGemmPanelN, p.n_end - n0);
      for (int64_t kb = 0; kb < p.w.scale_cols(); ++kb) {
        const int64_t k0 = kb * Fp8Matrix::kBlock;
        const int64_t k1 = std::min(k_total, k0 + Fp8Matrix::kBlock);
        const float scale = p.w.scale(n0, k0);
        pack_panel(p.w, n0, k0, k1, dec, panel);
        if ((k1 - k0) % 32 != 0) {
          panel_rows_avx512bf16(p, panel, mc, mc_end, n0, k0, k1, ncols, scale, kb == 0);
          continue;
        }
        int64_t m = mc;
        for (; m + 32 <= mc_end; m += 32)
          block32(p, p.x + m * p.x_stride + k0, p.x_stride, 32, panel, m, n0, k0, k1, ncols, scale,
                  kb == 0, tmp);
        if (m < mc_end) {
          const int rows = static_cast<int>(mc_end - m);
          std::memset(xpad, 0, sizeof(xpad));
          for (int i = 0; i < rows; ++i)
            std::memcpy(xpad + i * Fp8Matrix::kBlock, p.x + (m + i) * p.x_stride + k0,
                        sizeof(uint16_t) * static_cast<size_t>(k1 - k0));
          block32(p, xpad, Fp8Matrix::kBlock, rows, panel, m, n0, k0, k1, ncols, scale, kb == 0,
                  tmp);
        }
      }
    }
  }
}

}  // namespace hymoe::kernels::detail
