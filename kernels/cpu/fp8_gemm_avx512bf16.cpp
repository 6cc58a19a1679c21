// FP8 GEMM, AVX512-BF16: for each chunk of 256 rows of X and each 32-column panel of W, every
// 128-wide K block is decoded once into an 8 KB VNNI panel and swept by an 8 x 32 micro-kernel
// (16 ZMM accumulators); the block's product is post-scaled into C.
#include <algorithm>

#include "gemm_avx512bf16_kernel.h"
#include "variants.h"

namespace hymoe::kernels::detail {

void fp8_gemm_avx512bf16(const Fp8GemmParams& p) {
  const Fp8Bf16Decoder dec;
  alignas(64) uint32_t panel[kGemmPanelPairs * kGemmPanelN];
  const int64_t k_total = p.w.cols;
  for (int64_t mc = 0; mc < p.m; mc += kGemmChunkM) {
    const int64_t mc_end = std::min(p.m, mc + kGemmChunkM);
    for (int64_t n0 = p.n_begin; n0 < p.n_end; n0 += kGemmPanelN) {
      const int64_t ncols = std::min<int64_t>(kGemmPanelN, p.n_end - n0);
      for (int64_t kb = 0; kb < p.w.scale_cols(); ++kb) {
        const int64_t k0 = kb * Fp8MatrixView::kBlock;
        const int64_t k1 = std::min(k_total, k0 + Fp8MatrixView::kBlock);
        pack_panel(p.w, n0, k0, k1, dec, panel);
        panel_rows_avx512bf16(p, panel, mc, mc_end, n0, k0, k1, ncols, p.w.scale(n0, k0),
                              kb == 0);
      }
    }
  }
}

}  // namespace hymoe::kernels::detail
