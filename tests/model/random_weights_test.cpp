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
#include "../test_seed.h"

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
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
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
  const uint64_t seed = test::test_seed();
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

// ---- the generator's per-ISA loops against scalar references, every variant this CPU runs
#include "hymoe/common/cpu_features.h"
#include "random_kernels.h"

namespace hymoe {
namespace {

std::vector<const RandomKernels*> variants() {
  std::vector<const RandomKernels*> v = {&random_kernels(false)};
  if (cpu_features().avx2) v.push_back(&random_kernels(true));
  return v;
}

TEST(RandomKernels, EveryVariantMatchesTheScalarReference) {
  std::mt19937_64 rng = test::make_rng();
  for (const RandomKernels* k : variants()) {
    SCOPED_TRACE(k->isa);
    const int64_t n = 1000 + static_cast<int64_t>(rng() % 1000);  // ragged tails
    const uint64_t seed = rng();
    const int64_t first = static_cast<int64_t>(rng() % 100000);
    std::vector<float> out(n, std::nanf(""));
    k->normal_fill(out.data(), n, seed, first, 0.5f, 2.0f);
    double sum = 0, sum2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t c = static_cast<uint32_t>(first + i) * 2u;
      const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
      const float ref = 0.5f + 2.0f * normal_from_bits(keyed_bits(c, k0, k1), keyed_bits(c + 1, k0, k1));
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(ref)) << i;
      sum += out[i];
      sum2 += (out[i] - 0.5) * (out[i] - 0.5);
    }
    EXPECT_NEAR(sum / n, 0.5, 0.3);
    EXPECT_NEAR(std::sqrt(sum2 / n), 2.0, 0.3);

    std::vector<float> x(n);
    std::uniform_real_distribution<float> u(-300.0f, 300.0f);
    for (float& v : x) v = u(rng) * (rng() % 3 == 0 ? 1e-3f : 1.0f);
    float ref_max = 0;
    for (float v : x) ref_max = std::max(ref_max, std::fabs(v));
    EXPECT_EQ(std::bit_cast<float>(k->abs_max_bits(x.data(), n, 0)), ref_max);
    EXPECT_EQ(k->abs_max_bits(x.data(), n, 0x7F000000u), 0x7F000000u);

    const float inv = 1.37f;
    std::vector<uint8_t> codes(n, 0x7F);
    k->encode_scaled(x.data(), n, inv, codes.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(codes[i], float_to_fp8_e4m3(x[i] * inv)) << x[i];

    std::vector<uint16_t> half(n, 0x7FC1);
    k->to_bf16(x.data(), n, half.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(half[i], float_to_bf16(x[i])) << x[i];
  }
}

}  // namespace
}  // namespace hymoe
