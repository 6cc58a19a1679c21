// hymoe-make-model --preset tiny|deepseek-v3|kimi-k2 [--layers N] [--seed S] [--tokenizer DIR]
//                  --out DIR
// Writes config.json, model.safetensors.index.json and one shard per layer (plus embeddings and
// head) with random FP8 weights, deterministic per seed.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/presets.h"

int main(int argc, char** argv) {
  CLI::App app{"hymoe-make-model: write an HF-format FP8 checkpoint with random weights"};
  std::string preset;
  int layers = -1;
  uint64_t seed = 0;
  std::string tokenizer;
  std::string out;
  int threads = 0;
  std::string level = "info";
  app.add_option("--preset", preset, "tiny | deepseek-v3 | kimi-k2")
      ->required()
      ->check(CLI::IsMember(hymoe::preset_names()));
  app.add_option("--layers", layers, "decoder layers (default: the preset's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  app.add_option("--tokenizer", tokenizer,
                 "folder with tokenizer.json and tokenizer_config.json to copy")
      ->check(CLI::ExistingDirectory);
  app.add_option("--out", out, "output folder (created)")->required();
  app.add_option("--threads", threads, "generator threads (0: all)")->capture_default_str();
  app.add_option("--log-level", level, "trace|debug|info|warn|error|off")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    hymoe::log::set_level(level);
    hymoe::ModelWriteOptions options;
    options.seed = seed;
    options.threads = threads;
    if (!tokenizer.empty()) options.tokenizer_dir = tokenizer;
    hymoe::ModelConfig config = hymoe::preset_config(preset, layers);
    hymoe::write_random_checkpoint(config, out, options);
  } catch (const hymoe::Error& e) {
    std::fprintf(stderr, "hymoe-make-model: error (%s): %s\n",
                 std::string(hymoe::error_kind_name(e.kind())).c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hymoe-make-model: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
