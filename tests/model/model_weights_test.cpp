#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "hymoe/common/numeric.h"
#include "hymoe/model/model_weights.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/safetensors.h"
#include "hymoe/model/safetensors_writer.h"
#include "hymoe/model/weight_store.h"
#include "../test_seed.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::expect_error;
using test::TempDir;

TEST(ModelWeights, BindsTinyDummy) {
  ModelConfig c = preset_config("tiny");
  auto store = WeightStore::dummy(c, test::test_seed());
  ModelWeights w = ModelWeights::bind(*store);
  ASSERT_EQ(w.layers.size(), 3u);
  EXPECT_EQ(w.config, &store->config());
  EXPECT_TRUE(w.layers[0].dense.has_value());
  EXPECT_FALSE(w.layers[0].moe.has_value());
  for (int l : {1, 2}) {
    ASSERT_TRUE(w.layers[l].moe.has_value());
    EXPECT_FALSE(w.layers[l].dense.has_value());
    EXPECT_EQ(w.layers[l].moe->experts.size(), 16u);
    ASSERT_TRUE(w.layers[l].moe->shared.has_value());
    EXPECT_EQ(w.layers[l].moe->shared->gate.rows, 256);
    EXPECT_EQ(w.layers[l].moe->router_bias.dtype, DType::kF32);
  }
  const Fp8Matrix& kv_a = w.layers[1].attn.kv_a_with_mqa;
  EXPECT_EQ(kv_a.rows, 288);
  EXPECT_EQ(kv_a.cols, 256);
  EXPECT_EQ(kv_a.scale_rows(), 3);
  EXPECT_EQ(kv_a.scale_cols(), 2);
  const TensorView& kv_a_scale =
      store->tensor("model.layers.1.self_attn.kv_a_proj_with_mqa.weight_scale_inv");
  EXPECT_EQ(kv_a.scale(287, 200), kv_a_scale.as<float>()[2 * 2 + 1]);
  const Fp8Matrix& down = w.layers[2].moe->experts[15].down;
  EXPECT_EQ(down.data, store->tensor("model.layers.2.mlp.experts.15.down_proj.weight").as<uint8_t>());
  EXPECT_EQ(w.layers[0].attn.q_b.rows, 4 * 96);
  EXPECT_EQ(w.layers[0].attn.kv_b.rows, 4 * 128);
  EXPECT_EQ(w.layers[0].attn.o.cols, 4 * 64);

  const TensorView& emb = store->tensor("model.embed_tokens.weight");
  const int64_t row = 129279, col = 255;
  EXPECT_EQ(w.embed.at(row, col), bf16_to_float(emb.as<uint16_t>()[row * 256 + col]));
  EXPECT_EQ(w.layers[1].moe->router_bias.at(0, 5),
            store->tensor("model.layers.1.mlp.gate.e_score_correction_bias").as<float>()[5]);
  // Norm weights are 1 + small noise.
  EXPECT_NEAR(w.final_norm.at(0, 17), 1.0f, 0.5f);
}

// Rewrites one shard of a checkpoint with `edit` applied to its tensor list.
void rewrite_shard(const std::filesystem::path& shard,
                   const std::function<void(std::vector<std::pair<TensorSpec, std::vector<std::byte>>>&)>& edit) {
  SafetensorsHeader h = read_safetensors_header(shard);
  std::vector<std::pair<TensorSpec, std::vector<std::byte>>> tensors;
  {
    MappedFile m(shard);
    for (const auto& e : h.tensors) {
      const std::byte* p = m.data() + h.data_offset + e.begin;
      tensors.emplace_back(TensorSpec{e.name, e.dtype, e.shape}, std::vector<std::byte>(p, p + e.nbytes()));
    }
  }
  edit(tensors);
  write_safetensors(shard, tensors);
}

TEST(ModelWeights, BindErrorsNameTheTensor) {
  TempDir dir;
  write_random_checkpoint(preset_config("tiny"), dir.path(), {test::test_seed(), 2, std::nullopt});
  auto config_with = [&](auto mutate) {
    nlohmann::json j = preset_config("tiny").to_json();
    mutate(j);
    test::write_bytes(dir / "config.json", j.dump());
  };
  // Config and checkpoint disagree on a dimension.
  config_with([](nlohmann::json& j) { j["n_routed_experts"] = 32; });
  expect_error([&] { ModelWeights::bind(*WeightStore::open(dir.path(), {LoadMode::kMmap})); },
               ErrorKind::kCorruptData, {"model.layers.1.mlp.gate.weight", "[16, 256]", "[32, 256]"});
  // The config has a layer the checkpoint lacks.
  config_with([](nlohmann::json& j) { j["num_hidden_layers"] = 4; });
  expect_error([&] { ModelWeights::bind(*WeightStore::open(dir.path(), {LoadMode::kMmap})); },
               ErrorKind::kNotFound, {"model.layers.3.input_layernorm.weight", "missing"});
  // The config asks for a dense layer where the checkpoint has MoE.
  config_with([](nlohmann::json& j) { j["first_k_dense_replace"] = 2; });
  expect_error([&] { ModelWeights::bind(*WeightStore::open(dir.path(), {LoadMode::kMmap})); },
               ErrorKind::kNotFound, {"model.layers.1.mlp.gate_proj.weight"});
  // No quantization_config: not an FP8 checkpoint.
  config_with([](nlohmann::json& j) { j.erase("quantization_config"); });
  expect_error([&] { ModelWeights::bind(*WeightStore::open(dir.path(), {LoadMode::kMmap})); },
               ErrorKind::kUnsupported, {"FP8"});
  config_with([](nlohmann::json&) {});

  // Wrong dtype: the router bias stored as BF16, a scale stored as BF16.
  const auto layer1 = dir / "model-00003-of-00005.safetensors";
  rewrite_shard(layer1, [](auto& tensors) {
    for (auto& [spec, bytes] : tensors) {
      if (spec.name == "model.layers.1.mlp.gate.e_score_correction_bias") {
        spec.dtype = DType::kBF16;
        bytes.resize(spec.nbytes());
      }
    }
  });
  expect_error([&] { ModelWeights::bind(*WeightStore::open(dir.path(), {LoadMode::kLoad})); },
               ErrorKind::kCorruptData,
               {"model.layers.1.mlp.gate.e_score_correction_bias", "BF16", "F32"});
  // Wrong scale shape.
  const auto layer2 = dir / "model-00004-of-00005.safetensors";
  rewrite_shard(layer2, [](auto& tensors) {
    for (auto& [spec, bytes] : tensors) {
      if (spec.name == "model.layers.2.self_attn.o_proj.weight_scale_inv") {
        spec.shape = {2, 1};
        bytes.resize(spec.nbytes());
      }
    }
  });
  rewrite_shard(layer1, [](auto& tensors) {
    for (auto& [spec, bytes] : tensors) {
      if (spec.name == "model.layers.1.mlp.gate.e_score_correction_bias") {
        spec.dtype = DType::kF32;
        bytes.resize(spec.nbytes());
      }
    }
  });
  expect_error([&] { ModelWeights::bind(*WeightStore::open(dir.path(), {LoadMode::kMmap})); },
               ErrorKind::kCorruptData, {"model.layers.2.self_attn.o_proj.weight_scale_inv", "[2, 1]", "[2, 2]"});
}

TEST(ModelWeights, DenseMatrixAtDecodesEachType) {
  const uint16_t bf16[2] = {float_to_bf16(1.5f), float_to_bf16(-3.25f)};
  const uint16_t f16[2] = {float_to_f16(0.125f), float_to_f16(-7.0f)};
  const float f32[2] = {2.5f, -0.75f};
  EXPECT_EQ((DenseMatrix{DType::kBF16, bf16, 1, 2}.at(0, 1)), -3.25f);
  EXPECT_EQ((DenseMatrix{DType::kF16, f16, 2, 1}.at(1, 0)), -7.0f);
  EXPECT_EQ((DenseMatrix{DType::kF32, f32, 1, 2}.at(0, 0)), 2.5f);
  expect_error([&] { (void)DenseMatrix{DType::kI32, f32, 1, 2}.at(0, 0); }, ErrorKind::kInternal,
               {"I32"});
}

}  // namespace
}  // namespace hymoe
