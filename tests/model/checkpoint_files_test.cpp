#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "hymoe/model/safetensors.h"
#include "hymoe/model/safetensors_writer.h"
#include "../test_seed.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::expect_error;
using test::TempDir;

// The tensors' bytes: one generator, seeded by test::test_seed() at each test's first draw, so a
// test's draws replay with HYMOE_TEST_SEED whichever tests ran before it.
std::vector<std::byte> random_bytes(size_t n) {
  static std::mt19937 rng;
  static const ::testing::TestInfo* seeded_for = nullptr;
  const ::testing::TestInfo* now = ::testing::UnitTest::GetInstance()->current_test_info();
  if (now != seeded_for) {
    seeded_for = now;
    rng.seed(static_cast<uint32_t>(test::test_seed()));
  }
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xFF);
  return v;
}

void write_shard(const std::filesystem::path& path, const std::vector<std::string>& names) {
  std::vector<std::pair<TensorSpec, std::vector<std::byte>>> t;
  for (const auto& n : names) t.emplace_back(TensorSpec{n, DType::kBF16, {4, 8}}, random_bytes(64));
  write_safetensors(path, t);
}

void write_index(const std::filesystem::path& dir, const nlohmann::json& weight_map) {
  nlohmann::json j = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  test::write_bytes(dir / "model.safetensors.index.json", j.dump());
}

// Two shards and their index: a -> s1, b and c -> s2.
void write_sharded(const TempDir& dir) {
  write_shard(dir / "s1.safetensors", {"a"});
  write_shard(dir / "s2.safetensors", {"b", "c"});
  write_index(dir.path(), {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}, {"c", "s2.safetensors"}});
}

TEST(CheckpointFiles, ShardedIndex) {
  TempDir dir;
  write_sharded(dir);
  CheckpointFiles f = CheckpointFiles::scan(dir.path());
  ASSERT_EQ(f.shards.size(), 2u);
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].entry.name, "a");
  EXPECT_EQ(f.shards[f.tensors[f.by_name.at("c")].shard].filename(), "s2.safetensors");
  EXPECT_EQ(f.shard_sizes[0], std::filesystem::file_size(dir / "s1.safetensors"));
}

TEST(CheckpointFiles, SingleFile) {
  TempDir dir;
  write_shard(dir / "model.safetensors", {"x", "y"});
  CheckpointFiles f = CheckpointFiles::scan(dir.path());
  EXPECT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.shards.size(), 1u);
}

TEST(CheckpointFiles, Errors) {
  {
    TempDir dir;
    expect_error([&] { CheckpointFiles::scan(dir / "nothing-here"); }, ErrorKind::kNotFound,
                 {"nothing-here"});
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kNotFound,
                 {"model.safetensors"});
  }
  {  // the index names a shard that is not there
    TempDir dir;
    write_sharded(dir);
    std::filesystem::remove(dir / "s2.safetensors");
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kNotFound,
                 {"s2.safetensors", "shard missing", "'b'"});
  }
  {  // a tensor of the index is absent from its shard
    TempDir dir;
    write_sharded(dir);
    write_index(dir.path(), {{"a", "s1.safetensors"}, {"b", "s2.safetensors"},
                             {"c", "s2.safetensors"}, {"d", "s2.safetensors"}});
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kNotFound,
                 {"s2.safetensors", "'d'", "missing"});
  }
  {  // a shard holds a tensor the index does not list
    TempDir dir;
    write_sharded(dir);
    write_index(dir.path(), {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kCorruptData,
                 {"s2.safetensors", "'c'", "not in"});
  }
  {  // the same tensor in two shards
    TempDir dir;
    write_sharded(dir);
    write_shard(dir / "s1.safetensors", {"a", "b"});
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kCorruptData,
                 {"s1.safetensors", "'b'", "s2.safetensors"});
  }
  {  // index is not JSON, has no weight_map, escapes the folder, or repeats a name
    TempDir dir;
    write_sharded(dir);
    test::write_bytes(dir / "model.safetensors.index.json", "{\"weight_map\": {");
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kCorruptData,
                 {"model.safetensors.index.json", "JSON"});
    test::write_bytes(dir / "model.safetensors.index.json", "{\"metadata\": {}}");
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kCorruptData,
                 {"weight_map"});
    write_index(dir.path(), {{"a", "../s1.safetensors"}});
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kCorruptData,
                 {"'a'", "../s1.safetensors"});
    test::write_bytes(dir / "model.safetensors.index.json",
                      R"({"weight_map": {"a": "s1.safetensors", "a": "s2.safetensors"}})");
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kCorruptData,
                 {"'a' twice"});
  }
  {  // a shard that is corrupt: the shard's error surfaces with its name
    TempDir dir;
    write_sharded(dir);
    const std::string s2 = test::read_bytes(dir / "s2.safetensors");
    test::write_bytes(dir / "s2.safetensors", s2.substr(0, s2.size() - 10));
    expect_error([&] { CheckpointFiles::scan(dir.path()); }, ErrorKind::kCorruptData,
                 {"s2.safetensors", "'c'"});
  }
}

}  // namespace
}  // namespace hymoe
