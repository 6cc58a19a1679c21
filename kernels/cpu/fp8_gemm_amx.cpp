// FP8 GEMM, AMX-BF16 (Sapphire Rapids and later): the same panels as the AVX512-BF16 GEMM, with
// 32 x 32 blocks of C computed by four 16 x 16 FP32 tiles (tmm0-3) from two X tiles (tmm4-5) and
// two panel tiles (tmm6-7). Each 128-wide K block's tile sums are stored, post-scaled and added
// into an FP32 accumulator block, which is copied to C once all K blocks are in.
//
// Blocking, so that every operand of the tile loads comes from L1/L2 rather than L3: per chunk of
// kAmxChunkM rows x kAmxChunkN columns (the accumulator, 512 KB, in a per-thread scratch) and per
// K block, the chunk's X rows are copied into a contiguous slab (kAmxChunkM x 128 BF16, 256 KB,
// rows and K past the ends zero-filled) and the chunk's 4 panels are decoded (32 KB); every
// 32-row block of the slab then meets every panel. (The kernel before this one loaded its X
// tiles straight from X, a 14 KB row pitch at K = 7168, again for every panel: half this one's
// speed on the Xeon, results bitwise the same; docs/experiments.md.) Row tails and K blocks that
// are not a multiple of 32 wide run through the same tiles on the zero-filled slab and panels, so
// a row's result does not depend on how many rows share the call (batch invariance).
#include <immintrin.h>

#include <algorithm>
#include <memory>

#include "amx_tiles.h"
#include "gemm_avx512bf16_kernel.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

inline constexpr int64_t kAmxChunkN = 128;  // C columns per accumulator chunk: 4 panels
inline constexpr int kAmxPanels = static_cast<int>(kAmxChunkN / kGemmPanelN);
inline constexpr int64_t kSlabPitch = Fp8MatrixView::kBlock;  // BF16 per slab row: one K block

// Every tile 16 rows x 64 bytes: C 16 x 16 FP32, X 16 x 32 BF16, panels 16 K pairs x 16 columns.
TileConfig gemm_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.set(t, 16, 64);
  return cfg;
}

// One thread's buffers, allocated on its first call (784 KB: L2-sized on the Xeons with AMX).
struct AmxScratch {
  alignas(64) uint16_t slab[kAmxChunkM * kSlabPitch];
  alignas(64) float acc[kAmxChunkM * kAmxChunkN];
  alignas(64) uint32_t panels[kAmxPanels][kGemmPanelPairs * kGemmPanelN];
  alignas(64) float tmp[32 * 32];
};

AmxScratch& amx_scratch() {
  thread_local std::unique_ptr<AmxScratch> scratch;
  if (!scratch) scratch = std::make_unique<AmxScratch>();
  return *scratch;
}

// Slab rows [0, rows_padded) = X rows m0 .. m0 + rows_padded (rows of them exist), columns
// [k0, k1); zero past both ends. Its loads from X are about a third of the kernel's time at K = 7168 (they come
// from L3, 256 bytes a row, too many streams for the hardware prefetchers); neither a software
// prefetch of the next slab nor packing it 32 rows at a time between the current slab's tile
// blocks (to overlap the two) measured faster on this machine's Xeon.
void pack_slab(const Fp8GemmParams& p, int64_t m0, int64_t rows, int64_t rows_padded, int64_t k0,
               int64_t k1, uint16_t* slab) {
  const int64_t len = k1 - k0;
  for (int64_t i = 0; i < rows_padded; ++i) {
    uint16_t* dst = slab + i * kSlabPitch;
    if (i >= rows) {
      for (int64_t k = 0; k < kSlabPitch; k += 32) _mm512_store_si512(dst + k, _mm512_setzero_si512());
      continue;
    }
    const uint16_t* src = p.x + (m0 + i) * p.x_stride + k0;
    for (int64_t k = 0; k < kSlabPitch; k += 32) {
      const int64_t left = len - k;
      const __mmask32 m = _cvtu32_mask32(left >= 32 ? ~0u : left <= 0 ? 0u : (1u << left) - 1u);
      _mm512_store_si512(dst + k, _mm512_maskz_loadu_epi16(m, src + k));
    }
  }
}

// acc[0..32)[0..32) (pitch kAmxChunkN) (+)= scale * slab rows [0, 32) . panel over `steps` 32-wide
// K steps; first: store instead of accumulate (the first K block).
void block32(const uint16_t* slab, const uint32_t* panel, int64_t steps, float scale, bool first,
             float* acc, float* tmp) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr int64_t xs = kSlabPitch * 2;
  for (int64_t s = 0; s < steps; ++s) {
    const uint32_t* b = panel + s * 16 * kGemmPanelN;
    _tile_loadd(4, slab + s * 32, xs);
    _tile_loadd(5, slab + 16 * kSlabPitch + s * 32, xs);
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
  const __m512 sv = _mm512_set1_ps(scale);
  for (int i = 0; i < 32; ++i) {
    float* a = acc + i * kAmxChunkN;
    const __m512 t0 = _mm512_load_ps(tmp + i * 32), t1 = _mm512_load_ps(tmp + i * 32 + 16);
    // Explicit FMA, as in the AVX512-BF16 micro-kernel (no contraction that differs by caller).
    if (first) {
      _mm512_store_ps(a, _mm512_mul_ps(t0, sv));
      _mm512_store_ps(a + 16, _mm512_mul_ps(t1, sv));
    } else {
      _mm512_store_ps(a, _mm512_fmadd_ps(t0, sv, _mm512_load_ps(a)));
      _mm512_store_ps(a + 16, _mm512_fmadd_ps(t1, sv, _mm512_load_ps(a + 16)));
    }
  }
}

// C rows m0 .. m0 + rows, columns n0 .. n0 + ncols = the accumulator chunk.
void store_chunk(const Fp8GemmParams& p, const float* acc, int64_t m0, int64_t rows, int64_t n0,
                 int64_t ncols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* c = p.c + (m0 + i) * p.c_stride + n0;
    const float* a = acc + i * kAmxChunkN;
    for (int64_t j = 0; j < ncols; j += 16) {
      const int64_t left = ncols - j;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
      _mm512_mask_storeu_ps(c + j, m, _mm512_load_ps(a + j));
    }
  }
}

}  // namespace

void fp8_gemm_amx(const Fp8GemmParams& p) {
  if (p.m == 0 || p.n_begin == p.n_end) return;
  AmxScratch& s = amx_scratch();  // before the tile configuration: its first call allocates
  const TileScope tiles(gemm_tile_config());
  const Fp8Bf16Decoder dec;
  const int64_t k_total = p.w.cols;
  for (int64_t mc = 0; mc < p.m; mc += kAmxChunkM) {
    const int64_t rows = std::min(kAmxChunkM, p.m - mc);
    const int64_t rows_padded = (rows + 31) / 32 * 32;
    for (int64_t nc = p.n_begin; nc < p.n_end; nc += kAmxChunkN) {
      const int64_t ncols = std::min(kAmxChunkN, p.n_end - nc);
      const int panels = static_cast<int>((ncols + kGemmPanelN - 1) / kGemmPanelN);
      for (int64_t kb = 0; kb < p.w.scale_cols(); ++kb) {
        const int64_t k0 = kb * Fp8MatrixView::kBlock;
        const int64_t k1 = std::min(k_total, k0 + Fp8MatrixView::kBlock);
        const int64_t steps = (k1 - k0 + 31) / 32;  // zero-filled past k1 in slab and panels
        pack_slab(p, mc, rows, rows_padded, k0, k1, s.slab);
        for (int j = 0; j < panels; ++j) pack_panel(p.w, nc + j * kGemmPanelN, k0, k1, dec, s.panels[j]);
        for (int64_t m = 0; m < rows_padded; m += 32) {
          for (int j = 0; j < panels; ++j) {
            block32(s.slab + m * kSlabPitch, s.panels[j], steps, p.w.scale(nc + j * kGemmPanelN, k0),
                    kb == 0, s.acc + m * kAmxChunkN + j * kGemmPanelN, s.tmp);
          }
        }
      }
      store_chunk(p, s.acc, mc, rows, nc, ncols);
    }
  }
}

double amx_peak_loop(int64_t iters) {
  alignas(64) uint16_t src[16 * 32];
  alignas(64) float dst[16 * 16];
  for (auto& v : src) v = 0x3F80;  // 1.0
  const TileScope tiles(gemm_tile_config());
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, src, 64);
  _tile_loadd(5, src, 64);
  _tile_loadd(6, src, 64);
  _tile_loadd(7, src, 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, dst, 64);
  asm volatile("" ::"m"(dst));  // the sums are used
  return static_cast<double>(iters) * 4 * 16 * 16 * 32 * 2;
}

}  // namespace hymoe::kernels::detail
