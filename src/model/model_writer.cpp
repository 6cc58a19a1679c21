#include "hymoe/model/model_writer.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/model/checkpoint_layout.h"
#include "hymoe/model/random_weights.h"
#include "hymoe/model/safetensors_writer.h"
#include "parallel.h"

namespace hymoe {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  HYMOE_CHECK(out.good(), kIo, "{}: cannot write", path.string());
}

}  // namespace

int64_t tokenizer_vocab_size(const fs::path& tokenizer_json) {
  std::ifstream in(tokenizer_json, std::ios::binary);
  HYMOE_CHECK(in.good(), kNotFound, "{}: cannot open", tokenizer_json.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    HYMOE_THROW(kCorruptData, "{}: not valid JSON: {}", tokenizer_json.string(), e.what());
  }
  int64_t max_id = -1;
  if (j.contains("model") && j["model"].is_object() && j["model"].contains("vocab") &&
      j["model"]["vocab"].is_object()) {
    for (const auto& [token, id] : j["model"]["vocab"].items()) {
      if (id.is_number_integer()) max_id = std::max(max_id, id.get<int64_t>());
    }
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& t : j["added_tokens"]) {
      if (t.is_object() && t.contains("id") && t["id"].is_number_integer()) {
        max_id = std::max(max_id, t["id"].get<int64_t>());
      }
    }
  }
  HYMOE_CHECK(max_id >= 0, kCorruptData, "{}: no token ids in model.vocab or added_tokens",
              tokenizer_json.string());
  return max_id + 1;
}

ModelConfig write_random_checkpoint(ModelConfig config, const fs::path& out_dir,
                                    const ModelWriteOptions& options) {
  if (options.tokenizer_dir) {
    const int64_t needed = tokenizer_vocab_size(*options.tokenizer_dir / "tokenizer.json");
    config.vocab_size = std::max(config.vocab_size, needed);
  }
  config.validate("model to write");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  HYMOE_CHECK(!ec, kIo, "{}: cannot create: {}", out_dir.string(), ec.message());
  const int threads = options.threads > 0 ? options.threads : default_threads();
  const auto start = std::chrono::steady_clock::now();

  const std::vector<LayoutGroup> layout = checkpoint_layout(config);
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (size_t g = 0; g < layout.size(); ++g) {
    const std::string shard =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", g + 1, layout.size());
    std::vector<TensorSpec> specs;
    for (const LayoutTensor& t : layout[g].tensors) {
      specs.push_back(t.spec);
      weight_map[t.spec.name] = shard;
      total += t.spec.nbytes();
    }
    SafetensorsWriter writer(out_dir / shard, std::move(specs));
    std::vector<FillTarget> targets;
    for (size_t i = 0; i < layout[g].tensors.size(); ++i) {
      targets.push_back({&layout[g].tensors[i], writer.data(i)});
    }
    fill_random_weights(targets, options.seed, threads);
    writer.finish();
    log::get("load")->debug("wrote {} ({})", shard, layout[g].name);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_text(out_dir / "model.safetensors.index.json", index.dump(2) + "\n");
  write_text(out_dir / "config.json", config.to_json().dump(2) + "\n");

  if (options.tokenizer_dir) {
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(*options.tokenizer_dir / name, out_dir / name,
                    fs::copy_options::overwrite_existing, ec);
      HYMOE_CHECK(!ec, kIo, "{}: cannot copy to {}: {}", (*options.tokenizer_dir / name).string(),
                  out_dir.string(), ec.message());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::get("load")->info("wrote {} shards, {:.2f} GB to {} in {:.1f} s", layout.size(),
                         static_cast<double>(total) / 1e9, out_dir.string(), secs);
  return config;
}

}  // namespace hymoe
