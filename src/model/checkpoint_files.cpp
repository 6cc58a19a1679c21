// A checkpoint directory: the index (or the single file) and every shard's header, cross-checked.
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "hymoe/common/error.h"
#include "hymoe/model/safetensors.h"
#include "json_unique.h"
#include "posix_file.h"

namespace hymoe {
namespace {

namespace fs = std::filesystem;

// weight_map of model.safetensors.index.json: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const fs::path& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  HYMOE_CHECK(in.good(), kIo, "{}: cannot open", index_path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string file = index_path.string();
  nlohmann::json j = parse_json_unique_keys(text, file, "index");
  HYMOE_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
              kCorruptData, "{}: no 'weight_map' object", file);
  std::map<std::string, std::string> map;
  for (const auto& [name, shard] : j["weight_map"].items()) {
    HYMOE_CHECK(shard.is_string(), kCorruptData, "{}: weight_map entry of tensor '{}' is not a string",
                file, name);
    const std::string s = shard.get<std::string>();
    HYMOE_CHECK(!s.empty() && s.find('/') == std::string::npos && s != "." && s != "..",
                kCorruptData, "{}: tensor '{}' maps to '{}', not a file name in the directory",
                file, name, s);
    map.emplace(name, s);
  }
  return map;
}

}  // namespace

CheckpointFiles CheckpointFiles::scan(const fs::path& dir) {
  HYMOE_CHECK(fs::is_directory(dir), kNotFound, "{}: checkpoint directory not found", dir.string());
  CheckpointFiles c;
  c.dir = dir;

  const fs::path index_path = dir / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;
  const bool indexed = fs::exists(index_path);
  if (indexed) {
    weight_map = read_weight_map(index_path);
    for (const auto& [name, shard] : weight_map) c.shards.push_back(dir / shard);
    std::sort(c.shards.begin(), c.shards.end());
    c.shards.erase(std::unique(c.shards.begin(), c.shards.end()), c.shards.end());
  } else {
    const fs::path single = dir / "model.safetensors";
    HYMOE_CHECK(fs::exists(single), kNotFound,
                "{}: neither model.safetensors.index.json nor model.safetensors found", dir.string());
    c.shards.push_back(single);
  }

  for (size_t s = 0; s < c.shards.size(); ++s) {
    const fs::path& shard = c.shards[s];
    if (!fs::exists(shard)) {
      std::string example;
      for (const auto& [name, file] : weight_map) {
        if (dir / file == shard) {
          example = name;
          break;
        }
      }
      HYMOE_THROW(kNotFound, "{}: shard missing (index maps tensor '{}' to it)", shard.string(),
                  example);
    }
    SafetensorsHeader h = read_safetensors_header(shard);
    c.shard_sizes.push_back(h.data_offset + h.data_bytes);
    for (SafetensorsEntry& e : h.tensors) {
      if (indexed) {
        auto it = weight_map.find(e.name);
        HYMOE_CHECK(it != weight_map.end(), kCorruptData,
                    "{}: tensor '{}' is not in model.safetensors.index.json", shard.string(), e.name);
        HYMOE_CHECK(dir / it->second == shard, kCorruptData,
                    "{}: tensor '{}' is here but the index maps it to {}", shard.string(), e.name,
                    it->second);
      }
      auto [pos, fresh] = c.by_name.emplace(e.name, c.tensors.size());
      HYMOE_CHECK(fresh, kCorruptData, "{}: tensor '{}' also appears in {}", shard.string(), e.name,
                  c.shards[c.tensors[pos->second].shard].string());
      const uint64_t offset = h.data_offset + e.begin;
      c.tensors.push_back(CheckpointTensor{std::move(e), s, offset});
    }
  }
  for (const auto& [name, shard] : weight_map) {
    HYMOE_CHECK(c.by_name.count(name) != 0, kNotFound,
                "{}: tensor '{}' listed in the index is missing from the shard",
                (dir / shard).string(), name);
  }

  std::sort(c.tensors.begin(), c.tensors.end(),
            [](const auto& a, const auto& b) { return a.entry.name < b.entry.name; });
  c.by_name.clear();
  for (size_t i = 0; i < c.tensors.size(); ++i) c.by_name.emplace(c.tensors[i].entry.name, i);
  return c;
}

}  // namespace hymoe
