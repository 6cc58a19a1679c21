#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "hymoe/model/model_weights.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"
#include "../test_seed.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::expect_error;
using test::TempDir;

TEST(ModelWriter, TinyCheckpointOpensAndBinds) {
  TempDir dir;
  TempDir tok;
  // A tokenizer whose largest id is beyond the preset's vocabulary.
  nlohmann::json tj = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"c", 5000}}}}},
                       {"added_tokens", {{{"id", 130001}, {"content", "<x>"}}}}};
  test::write_bytes(tok / "tokenizer.json", tj.dump());
  test::write_bytes(tok / "tokenizer_config.json", R"({"chat_template": "{{ x }}"})");

  const uint64_t seed = test::test_seed();
  ModelConfig written = write_random_checkpoint(preset_config("tiny"), dir.path(),
                                                {seed, 2, tok.path()});
  EXPECT_EQ(written.vocab_size, 130002);
  EXPECT_TRUE(std::filesystem::exists(dir / "tokenizer.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "tokenizer_config.json"));

  nlohmann::json cfg = nlohmann::json::parse(test::read_bytes(dir / "config.json"));
  EXPECT_EQ(cfg["architectures"][0], "DeepseekV3ForCausalLM");
  EXPECT_EQ(cfg["model_type"], "deepseek_v3");
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  EXPECT_EQ(cfg["vocab_size"], 130002);
  EXPECT_EQ(cfg["quantization_config"]["fmt"], "e4m3");
  EXPECT_EQ(cfg["rope_scaling"]["type"], "yarn");
  nlohmann::json index = nlohmann::json::parse(test::read_bytes(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00005-of-00005.safetensors");
  EXPECT_EQ(index["weight_map"]["model.layers.2.mlp.experts.0.up_proj.weight"],
            "model-00004-of-00005.safetensors");

  auto store = WeightStore::open(dir.path(), {LoadMode::kLoad, true, 0, 2});
  ModelWeights w = ModelWeights::bind(*store);
  EXPECT_EQ(w.embed.rows, 130002);
  EXPECT_EQ(w.lm_head.rows, 130002);
}

TEST(ModelWriter, DeterministicPerSeed) {
  TempDir a, b, c;
  const uint64_t seed = test::test_seed();
  write_random_checkpoint(preset_config("tiny", 2), a.path(), {seed, 1, std::nullopt});
  write_random_checkpoint(preset_config("tiny", 2), b.path(), {seed, 2, std::nullopt});
  write_random_checkpoint(preset_config("tiny", 2), c.path(), {seed + 1, 2, std::nullopt});
  for (const auto& e : std::filesystem::directory_iterator(a.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(test::read_bytes(e.path()), test::read_bytes(b / name)) << name;
  }
  EXPECT_NE(test::read_bytes(a / "model-00003-of-00004.safetensors"),
            test::read_bytes(c / "model-00003-of-00004.safetensors"));
}

TEST(ModelWriter, TokenizerErrors) {
  TempDir dir, tok;
  expect_error([&] { write_random_checkpoint(preset_config("tiny"), dir.path(), {1, 1, tok.path()}); },
               ErrorKind::kNotFound, {"tokenizer.json"});
  test::write_bytes(tok / "tokenizer.json", R"({"model": {"vocab": {}}})");
  expect_error([&] { tokenizer_vocab_size(tok / "tokenizer.json"); }, ErrorKind::kCorruptData,
               {"no token ids"});
}

}  // namespace
}  // namespace hymoe
