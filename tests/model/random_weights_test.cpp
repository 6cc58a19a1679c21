#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/model/checkpoint_layout.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/random_weights.h"

namespace hymoe {
namespace {

TEST(RandomWeights, FastEncoderMatchesReference) {
  // Every code's value, the midpoints between neighbours (ties), and their float neighbours.
  std::vector<float> probes;
  for (int c = 0; c < 0x7F; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    const float next = c + 1 < 0x7F ? fp8_e4m3_to_float(static_cast<uint8_t>(c + 1)) : 480.0f;
    const float mid = 0.5f * (v + next);
    for (float p : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      probes.push_back(p);
      probes.push_back(-p);
    }
  }
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> exp_dist(-14.0f, 9.5f);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::exp2(exp_dist(rng)) * (rng() & 1 ? 1.0f : -1.0f);
    probes.push_back(v);
  }
  probes.push_back(1e6f);
  probes.push_back(-1e30f);
  for (float p : probes) {
    ASSERT_EQ(encode_e4m3_fast(p), float_to_fp8_e4m3(p)) << p;
  }
}

TEST(RandomWeights, Fp8StatisticsAndDeterminism) {
  ModelConfig c = preset_config("tiny");
  std::vector<LayoutGroup> layout = checkpoint_layout(c);
  const LayoutGroup& layer = layout[1];  // layer 0: dense
  const LayoutTensor* w = nullptr;
  const LayoutTensor* s = nullptr;
  for (const LayoutTensor& t : layer.tensors) {
    if (t.spec.name == "model.layers.0.self_attn.kv_a_proj_with_mqa.weight") w = &t;
    if (t.spec.name == "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv") s = &t;
  }
  ASSERT_TRUE(w && s);
  ASSERT_EQ(w->spec.shape, (std::vector<int64_t>{288, 256}));
  ASSERT_EQ(s->spec.shape, (std::vector<int64_t>{3, 2}));
  auto run = [&](uint64_t seed, int threads) {
    std::vector<std::byte> wb(w->spec.nbytes()), sb(s->spec.nbytes());
    std::fill(wb.begin(), wb.end(), std::byte{0x7F});  // NaN codes: every byte must be written
    std::vector<float> nan(s->spec.numel(), std::nanf(""));
    std::memcpy(sb.data(), nan.data(), sb.size());
    std::vector<FillTarget> targets = {{w, wb}, {s, sb}};
    fill_random_weights(targets, seed, threads);
    return std::make_pair(wb, sb);
  };
  const uint64_t seed = std::random_device{}();
  auto [wb, sb] = run(seed, 1);
  auto again = run(seed, 3);
  EXPECT_EQ(wb, again.first);
  EXPECT_EQ(sb, again.second);
  EXPECT_NE(wb, run(seed + 1, 2).first);

  const auto* codes = reinterpret_cast<const uint8_t*>(wb.data());
  const auto* scales = reinterpret_cast<const float*>(sb.data());
  double sum2 = 0;
  for (int64_t br = 0; br < 3; ++br) {
    for (int64_t bc = 0; bc < 2; ++bc) {
      const float scale = scales[br * 2 + bc];
      ASSERT_TRUE(std::isfinite(scale) && scale > 0);
      float amax = 0;
      for (int64_t r = br * 128; r < std::min<int64_t>(288, br * 128 + 128); ++r) {
        for (int64_t col = bc * 128; col < bc * 128 + 128; ++col) {
          const uint8_t code = codes[r * 256 + col];
          ASSERT_NE(code & 0x7F, 0x7F) << "NaN code at " << r << "," << col;
          const float v = fp8_e4m3_to_float(code);
          amax = std::max(amax, std::fabs(v));
          sum2 += double(v * scale) * double(v * scale);
        }
      }
      EXPECT_EQ(amax, 448.0f) << "block " << br << "," << bc << " does not use the e4m3 range";
    }
  }
  const double rms = std::sqrt(sum2 / (288.0 * 256.0));
  EXPECT_NEAR(rms, 1.0 / 16.0, 0.1 / 16.0);  // std 1/sqrt(in = 256)
}

TEST(RandomWeights, WeightWithoutScaleIsAnError) {
  ModelConfig c = preset_config("tiny");
  std::vector<LayoutGroup> layout = checkpoint_layout(c);
  const LayoutTensor& w = layout[1].tensors[2];
  ASSERT_EQ(w.role, TensorRole::kFp8Weight);
  std::vector<std::byte> wb(w.spec.nbytes());
  std::vector<FillTarget> targets = {{&w, wb}};
  EXPECT_THROW(fill_random_weights(targets, 1, 1), Error);
}

TEST(CheckpointLayout, TinyTensors) {
  ModelConfig c = preset_config("tiny");
  std::vector<LayoutGroup> layout = checkpoint_layout(c);
  ASSERT_EQ(layout.size(), 5u);  // embed, 3 layers, head
  size_t fp8 = 0, experts = 0;
  for (const auto& g : layout) {
    for (const auto& t : g.tensors) {
      fp8 += t.role == TensorRole::kFp8Weight;
      experts += t.expert >= 0 && t.role == TensorRole::kFp8Weight;
      const ExpertId id = parse_expert_name(t.spec.name);
      EXPECT_EQ(id.expert, t.expert) << t.spec.name;
      if (id.expert >= 0) {
        EXPECT_EQ(id.layer, t.layer);
      }
    }
  }
  // 3 layers x 5 attention + 1 dense MLP x 3 + 2 MoE layers x (16 + 1 shared) x 3
  EXPECT_EQ(fp8, 15u + 3u + 2u * 17u * 3u);
  EXPECT_EQ(experts, 2u * 16u * 3u);
  EXPECT_EQ(parse_expert_name("model.layers.12.mlp.experts.255.down_proj.weight").expert, 255);
  EXPECT_EQ(parse_expert_name("model.layers.12.mlp.experts.255.down_proj.weight").layer, 12);
  EXPECT_EQ(parse_expert_name("model.layers.12.mlp.shared_experts.down_proj.weight").expert, -1);
  EXPECT_EQ(parse_expert_name("model.layers.x.mlp.experts.1.up_proj.weight").expert, -1);
  EXPECT_EQ(parse_expert_name("model.layers.1.mlp.experts.").expert, -1);
}

}  // namespace
}  // namespace hymoe
