// Writing a complete HF-format checkpoint with random weights (what hymoe-make-model does).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "hymoe/model/config.h"

namespace hymoe {

struct ModelWriteOptions {
  uint64_t seed = 0;
  int threads = 0;  // 0: every hardware thread
  // A folder holding tokenizer.json and tokenizer_config.json to copy next to the weights; the
  // vocabulary then grows to cover the tokenizer's largest id when needed.
  std::optional<std::filesystem::path> tokenizer_dir;
};

// The largest token id of a tokenizer.json (model.vocab and added_tokens) + 1.
// Throws hymoe::Error naming the file when it cannot be read or holds no ids.
int64_t tokenizer_vocab_size(const std::filesystem::path& tokenizer_json);

// Writes config.json (loadable by HF DeepseekV3Config), model.safetensors.index.json and one
// shard per checkpoint_layout() group (model-000NN-of-000MM.safetensors) into `out_dir`
// (created if needed), with fill_random_weights() values; copies the tokenizer files if asked.
// Deterministic per seed. Returns the config written (vocab possibly grown for the tokenizer).
ModelConfig write_random_checkpoint(ModelConfig config, const std::filesystem::path& out_dir,
                                    const ModelWriteOptions& options = {});

}  // namespace hymoe
