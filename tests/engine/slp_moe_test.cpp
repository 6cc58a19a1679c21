// SLP's MoE stage on a generated tiny checkpoint: two MoE layers' routed experts streamed
// through a ring shorter than a layer and through one that holds a whole layer, against a float64
// reference of the experts (FP8 weights dequantised; the stage quantises its activations to FP8
// in 1 x 128 blocks, hence the tolerance), and the two rings' outputs equal up to the grouped
// GEMM's accumulation order (its tile shape follows a batch's row count). Skipped without a CUDA
// device.
#include "hymoe/engine/slp_moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/model/presets.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/stream.h"
#include "engine_test_util.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

TEST(SlpMoe, BatchOffsetsEmptyEveryExpertOutsideTheBatch) {
  // 5 experts with 3, 0, 4, 2, 1 rows; the batch [1, 4): experts 1-3, rows 3..9.
  const std::vector<int32_t> off = {0, 3, 3, 7, 9, 10};
  std::vector<int32_t> abs(off.size(), -1), rel(off.size(), -1);
  slp_batch_offsets(off, 1, 4, abs, rel);
  EXPECT_EQ(abs, (std::vector<int32_t>{3, 3, 3, 7, 9, 9}));
  EXPECT_EQ(rel, (std::vector<int32_t>{0, 0, 0, 4, 6, 6}));
  for (size_t g = 0; g + 1 < off.size(); ++g) {
    const bool inside = g >= 1 && g < 4;
    EXPECT_EQ(abs[g + 1] - abs[g], inside ? off[g + 1] - off[g] : 0) << "expert " << g;
  }
  slp_batch_offsets(off, 0, 5, abs, rel);  // the whole layer: unchanged
  EXPECT_EQ(abs, off);
  EXPECT_EQ(rel, off);
  EXPECT_THROW(slp_batch_offsets(off, 3, 3, abs, rel), Error);  // an empty batch
  EXPECT_THROW(slp_batch_offsets(off, 0, 6, abs, rel), Error);  // past the experts
}

TEST(SlpMoe, SlotLayoutHoldsAnExpertAligned) {
  const ModelConfig c = preset_config("deepseek-v3", 4);
  const ExpertSlotLayout l = ExpertSlotLayout::of(c);
  const size_t w = static_cast<size_t>(c.hidden_size * c.moe_intermediate_size);
  EXPECT_EQ(l.gate_scale_ld, 56);  // 7168 / 128, already a multiple of 4
  EXPECT_EQ(l.down_scale_ld, 16);  // 2048 / 128
  for (size_t off : {l.gate_w, l.up_w, l.down_w, l.gate_s, l.up_s, l.down_s}) EXPECT_EQ(off % 256, 0u);
  EXPECT_GE(l.up_w - l.gate_w, w);
  EXPECT_GE(l.down_w - l.up_w, w);
  EXPECT_GE(l.gate_s - l.down_w, w);
  EXPECT_GE(l.up_s - l.gate_s, static_cast<size_t>(16 * 56) * sizeof(float));     // [2048/128, 56]
  EXPECT_GE(l.down_s - l.up_s, static_cast<size_t>(16 * 56) * sizeof(float));
  EXPECT_GE(l.bytes - l.down_s, static_cast<size_t>(56 * 16) * sizeof(float));    // [7168/128, 16]
  EXPECT_LT(l.bytes, 3 * w + (size_t{1} << 16));  // 44 MB of weights and a few KB of scales
}

TEST(SlpMoe, StreamedExpertsMatchTheReferenceWhateverTheRingLength) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  test::TinyModel model("hymoe_slp_moe", 777, 2048);
  const ModelConfig& c = model.store->config();
  const ModelWeights& w = *model.weights;
  const int T = 37, K = static_cast<int>(c.num_experts_per_tok), E = static_cast<int>(c.n_routed_experts);
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  std::vector<int64_t> moe_layers;
  for (size_t l = 0; l < w.layers.size(); ++l)
    if (w.layers[l].moe) moe_layers.push_back(static_cast<int64_t>(l));
  ASSERT_GE(moe_layers.size(), 2u);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(T * H));
  for (auto& v : x) v = float_to_bf16(normal(rng));
  auto [ids, wts] = test::random_routing(T, E, K, rng);
  gpu::Stream s;
  gpu::DeviceBuffer dx(x.size() * 2), dids(ids.size() * 4), dw(wts.size() * 4), dout(x.size() * 4);
  dx.copy_from_host(x.data(), x.size() * 2, s);
  dids.copy_from_host(ids.data(), ids.size() * 4, s);
  dw.copy_from_host(wts.data(), wts.size() * 4, s);
  gpu::CublasLt lt;
  SlpMoe moe(c, lt, 64, nullptr);
  std::vector<ExpertStreamer::Item> schedule;
  for (int64_t l : moe_layers)
    for (int32_t e = 0; e < E; ++e) schedule.push_back({l, e});

  // out[layer][t * H + i] for a ring of `slots`.
  auto run = [&](int slots) {
    ExpertRing ring(c, slots, nullptr);
    ExpertStreamer streamer(ring, w, 0);
    streamer.start(schedule);
    std::vector<std::vector<float>> outs;
    for (size_t li = 0; li < moe_layers.size(); ++li) {
      dout.fill_bytes(0xFF, s);  // NaN: a row the stage does not set shows
      moe.run({.x = dx.as<gpu::Bf16>(), .topk_ids = dids.as<int32_t>(), .topk_weights = dw.as<float>(),
               .out = dout.as<float>(), .tokens = T, .first_item = li * static_cast<size_t>(E)},
              streamer, ring, s);
      std::vector<float> o(x.size());
      dout.copy_to_host(o.data(), o.size() * 4, s);
      s.synchronize();
      outs.push_back(o);
    }
    streamer.finish();
    return outs;
  };
  const auto short_ring = run(3), whole_layer = run(E);
  for (size_t li = 0; li < moe_layers.size(); ++li) {
    const MoeWeights& m = *w.layers[static_cast<size_t>(moe_layers[li])].moe;
    double num = 0, den = 0;
    for (int t = 0; t < T; ++t) {
      std::vector<double> ref(static_cast<size_t>(H), 0.0);
      for (int k = 0; k < K; ++k) {
        const MlpWeights& ex = m.experts[static_cast<size_t>(ids[static_cast<size_t>(t * K + k)])];
        std::vector<double> act(static_cast<size_t>(I));
        for (int64_t r = 0; r < I; ++r) {
          double g = 0, u = 0;
          for (int64_t col = 0; col < H; ++col) {
            const double xv = bf16_to_float(x[static_cast<size_t>(t * H + col)]);
            g += fp8_e4m3_to_float(ex.gate.data[r * H + col]) * ex.gate.scale(r, col) * xv;
            u += fp8_e4m3_to_float(ex.up.data[r * H + col]) * ex.up.scale(r, col) * xv;
          }
          act[static_cast<size_t>(r)] = g / (1 + std::exp(-g)) * u;
        }
        for (int64_t r = 0; r < H; ++r) {
          double d = 0;
          for (int64_t col = 0; col < I; ++col)
            d += fp8_e4m3_to_float(ex.down.data[r * I + col]) * ex.down.scale(r, col) * act[static_cast<size_t>(col)];
          ref[static_cast<size_t>(r)] += wts[static_cast<size_t>(t * K + k)] * d;
        }
      }
      for (int64_t i = 0; i < H; ++i) {
        const double got = short_ring[li][static_cast<size_t>(t * H + i)];
        ASSERT_FALSE(std::isnan(got)) << "layer " << moe_layers[li] << " token " << t << " column " << i;
        num += (got - ref[static_cast<size_t>(i)]) * (got - ref[static_cast<size_t>(i)]);
        den += ref[static_cast<size_t>(i)] * ref[static_cast<size_t>(i)];
      }
    }
    const double err = std::sqrt(num / den);
    std::printf("SLP MoE layer %lld vs float64 reference: normalised error %.3e\n",
                static_cast<long long>(moe_layers[li]), err);
    EXPECT_LT(err, 8e-2) << "layer " << moe_layers[li];  // FP8 activations: a few percent
    // Ring lengths batch the experts differently and the grouped GEMM may take another tile
    // shape for a batch's row count (another accumulation order): equal up to rounding.
    double dn = 0, dd = 0;
    for (size_t i = 0; i < short_ring[li].size(); ++i) {
      const double u = short_ring[li][i], v = whole_layer[li][i];
      ASSERT_FALSE(std::isnan(v)) << "layer " << moe_layers[li] << " value " << i;
      dn += (u - v) * (u - v);
      dd += v * v;
    }
    EXPECT_LT(std::sqrt(dn / dd), 1e-2) << "layer " << moe_layers[li] << ": ring of 3 vs a whole layer";
  }
}

}  // namespace
}  // namespace hymoe
