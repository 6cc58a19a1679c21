// GpuLinear (prompt-sized FP8 projections) against a float64 reference on a tiny model's resident
// matrices, whose 256-column rows need the padded scale copy (ceil(256/128) = 2 scale columns,
// the GEMM reads rows of 4), at row counts below and above the GEMM's 64-row tiles, output rows
// strided with NaN poison between them. Skipped without a CUDA device.
#include "hymoe/engine/gpu_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/stream.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

TEST(GpuLinear, MatchesTheReferenceThroughThePaddedScales) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  test::TinyModel model("hymoe_gpu_linear", 99, 2048);
  GpuModel gm(*model.store, GpuModelOptions{.kv_cache_bytes = 16 << 20, .kv_block_tokens = 16});
  const LayerWeights& lw = model.weights->layers[1];
  const DevLayer& dl = gm.layer(1);
  ASSERT_NE(gpu::block_scale_ld(static_cast<int>(lw.attn.q_a.cols)), lw.attn.q_a.scale_cols());
  EXPECT_GT(dl.q_a.gemm_scales.bytes(), 0u);
  gpu::CublasLt lt;
  GpuLinear lin(lt, 320, 1024, nullptr);
  gpu::Stream s;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& [name, host, dev] : {std::tuple{"q_a", &lw.attn.q_a, &dl.q_a}, std::tuple{"o", &lw.attn.o, &dl.o},
                                        std::tuple{"q_b", &lw.attn.q_b, &dl.q_b}}) {
    for (const int T : {37, 300}) {
      const int64_t k = host->cols, n = host->rows, ldx = k + 8, ldy = n + 5;
      std::vector<uint16_t> x(static_cast<size_t>(T * ldx));
      for (auto& v : x) v = float_to_bf16(normal(rng));
      gpu::DeviceBuffer dx(x.size() * 2), dy(static_cast<size_t>(T * ldy) * 2);
      dx.copy_from_host(x.data(), x.size() * 2, s);
      dy.fill_bytes(0xFF, s);
      lin.run(*dev, dx.as<gpu::Bf16>(), ldx, T, dy.as<gpu::Bf16>(), ldy, s);
      std::vector<uint16_t> y(static_cast<size_t>(T * ldy));
      dy.copy_to_host(y.data(), y.size() * 2, s);
      s.synchronize();
      double num = 0, den = 0;
      for (int t = 0; t < T; ++t) {
        for (int64_t r = 0; r < n; ++r) {
          double ref = 0;
          for (int64_t c = 0; c < k; ++c)
            ref += fp8_e4m3_to_float(host->data[r * k + c]) * host->scale(r, c) * bf16_to_float(x[static_cast<size_t>(t * ldx + c)]);
          const double got = bf16_to_float(y[static_cast<size_t>(t * ldy + r)]);
          ASSERT_FALSE(std::isnan(got)) << name << " T " << T << " row " << t << " column " << r;
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
        for (int64_t r = n; r < ldy; ++r)
          ASSERT_TRUE(std::isnan(bf16_to_float(y[static_cast<size_t>(t * ldy + r)]))) << "written past the row";
      }
      const double err = std::sqrt(num / den);
      std::printf("GpuLinear %s (%lldx%lld), %d rows: normalised error %.3e\n", name, static_cast<long long>(n),
                  static_cast<long long>(k), T, err);
      EXPECT_LT(err, 4e-2) << name << " at " << T << " rows";  // FP8 activations: a few percent
    }
  }
  EXPECT_THROW(lin.run(dl.q_a, nullptr, 256, 321, nullptr, 256, s), Error);
}

}  // namespace
}  // namespace hymoe
