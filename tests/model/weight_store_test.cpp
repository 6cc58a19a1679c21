#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "host_arena.h"
#include "hymoe/model/checkpoint_layout.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/placement.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/safetensors.h"
#include "hymoe/model/weight_store.h"
#include "indexed_store.h"
#include "posix_file.h"
#include "../test_seed.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::expect_error;
using test::TempDir;

// One tiny checkpoint written for the whole suite (test::test_seed(): fresh each run, printed,
// HYMOE_TEST_SEED replays it).
class WeightStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    seed_ = test::test_seed();
    write_random_checkpoint(preset_config("tiny"), dir_->path(), {seed_, 2, std::nullopt});
  }
  static void TearDownTestSuite() { delete dir_; }

  // Every tensor of `store` equals the bytes in the shard files, read through the headers.
  static void expect_matches_files(const WeightStore& store) {
    CheckpointFiles files = CheckpointFiles::scan(dir_->path());
    std::vector<MappedFile> maps;
    for (const auto& s : files.shards) maps.emplace_back(s);
    ASSERT_EQ(store.names().size(), files.tensors.size());
    for (const CheckpointTensor& t : files.tensors) {
      const TensorView& v = store.tensor(t.entry.name);
      EXPECT_EQ(v.dtype, t.entry.dtype);
      EXPECT_EQ(v.shape, t.entry.shape);
      ASSERT_EQ(v.nbytes, t.entry.nbytes());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype), 0u);
      ASSERT_EQ(0, std::memcmp(v.data, maps[t.shard].data() + t.file_offset, v.nbytes)) << v.name;
    }
  }

  static TempDir* dir_;
  static uint64_t seed_;
};
TempDir* WeightStoreTest::dir_ = nullptr;
uint64_t WeightStoreTest::seed_ = 0;

TEST_F(WeightStoreTest, MmapModeEqualsFiles) {
  auto store = WeightStore::open(dir_->path(), {LoadMode::kMmap, true, 0, 1});
  EXPECT_EQ(store->config().to_json(), preset_config("tiny").to_json());
  expect_matches_files(*store);
  EXPECT_EQ(store->regions().size(), 5u);  // one mapping per shard
  EXPECT_EQ(store->find("no.such.tensor"), nullptr);
  expect_error([&] { store->tensor("no.such.tensor"); }, ErrorKind::kNotFound, {"no.such.tensor"});
}

TEST_F(WeightStoreTest, LoadModeEqualsFiles) {
  for (int threads : {1, 3}) {
    auto store = WeightStore::open(dir_->path(), {LoadMode::kLoad, true, 0, threads});
    expect_matches_files(*store);
    size_t tensor_bytes = 0;
    for (const auto& n : store->names()) tensor_bytes += store->tensor(n).nbytes;
    EXPECT_GE(store->total_bytes(), tensor_bytes);
  }
}

TEST_F(WeightStoreTest, DummyEqualsTheWrittenCheckpoint) {
  auto dummy = WeightStore::dummy(preset_config("tiny"), seed_);
  expect_matches_files(*dummy);
  auto other = WeightStore::dummy(preset_config("tiny"), seed_ + 1);
  const TensorView& a = dummy->tensor("model.layers.1.mlp.experts.3.up_proj.weight");
  const TensorView& b = other->tensor("model.layers.1.mlp.experts.3.up_proj.weight");
  EXPECT_NE(0, std::memcmp(a.data, b.data, a.nbytes));
}

TEST_F(WeightStoreTest, OpenErrors) {
  TempDir bad;
  expect_error([&] { WeightStore::open(bad.path()); }, ErrorKind::kNotFound, {"config.json"});
  for (const auto& e : std::filesystem::directory_iterator(dir_->path())) {
    std::filesystem::copy(e.path(), bad / e.path().filename().string());
  }
  const auto shard = bad / "model-00003-of-00005.safetensors";
  const std::string bytes = test::read_bytes(shard);
  test::write_bytes(shard, bytes.substr(0, bytes.size() / 2));
  for (LoadMode mode : {LoadMode::kMmap, LoadMode::kLoad}) {
    expect_error([&] { WeightStore::open(bad.path(), {mode, true, 0, 2}); },
                 ErrorKind::kCorruptData, {"model-00003-of-00005.safetensors", "model.layers.1."});
  }
  std::filesystem::remove(shard);
  expect_error([&] { WeightStore::open(bad.path()); }, ErrorKind::kNotFound,
               {"model-00003-of-00005.safetensors"});
}

// A shard that shrinks between its header read and the data read (kLoad's pread path).
TEST(PosixFile, ShortReadNamesFileAndTensor) {
  TempDir dir;
  test::write_bytes(dir / "f.bin", std::string(100, 'x'));
  PosixFile f(dir / "f.bin");
  EXPECT_EQ(f.size(), 100u);
  std::vector<char> buf(64, 0);
  f.read_exact(buf.data(), 64, 36, "ok.tensor");
  EXPECT_EQ(buf[63], 'x');
  expect_error([&] { f.read_exact(buf.data(), 64, 40, "late.tensor"); }, ErrorKind::kCorruptData,
               {"f.bin", "late.tensor", "truncated"});
  expect_error([&] { PosixFile missing(dir / "missing.bin"); }, ErrorKind::kNotFound, {"missing.bin"});
  expect_error([&] { PosixFile folder(dir.path()); }, ErrorKind::kIo, {"not a regular file"});
}

TEST(Placement, ContiguousBalancedRanges) {
  for (int64_t experts : {16, 256, 384, 7}) {
    for (int nodes : {1, 2, 3, 4, 8}) {
      std::vector<int64_t> count(nodes, 0);
      int prev = 0;
      for (int64_t e = 0; e < experts; ++e) {
        const int n = expert_numa_node(e, experts, nodes);
        ASSERT_GE(n, prev);  // contiguous: nodes never go back
        ASSERT_LT(n, nodes);
        prev = n;
        ++count[n];
        EXPECT_GE(e, first_expert_of_node(n, experts, nodes));
        EXPECT_LT(e, first_expert_of_node(n + 1, experts, nodes));
      }
      const auto [lo, hi] = std::minmax_element(count.begin(), count.end());
      EXPECT_LE(*hi - *lo, 1) << experts << " experts on " << nodes << " nodes";
    }
  }
  EXPECT_EQ(expert_numa_node(127, 256, 2), 0);
  EXPECT_EQ(expert_numa_node(128, 256, 2), 1);
  EXPECT_EQ(expert_numa_node(0, 384, 1), 0);
}

TEST(Placement, TensorNodes) {
  ModelConfig c = preset_config("tiny");
  EXPECT_EQ(tensor_numa_node(c, "model.layers.1.mlp.experts.15.up_proj.weight", 2), 1);
  EXPECT_EQ(tensor_numa_node(c, "model.layers.1.mlp.experts.7.up_proj.weight_scale_inv", 2), 0);
  EXPECT_EQ(tensor_numa_node(c, "model.layers.1.mlp.experts.15.up_proj.weight", 1), -1);
  EXPECT_EQ(tensor_numa_node(c, "model.layers.1.mlp.shared_experts.up_proj.weight", 2), -1);
  EXPECT_EQ(tensor_numa_node(c, "model.embed_tokens.weight", 4), -1);
  expect_error([] { resolve_numa_nodes(numa_node_count() + 1); }, ErrorKind::kInvalidArgument,
               {"NUMA"});
  EXPECT_EQ(resolve_numa_nodes(0), numa_node_count());
}

// Real binding: only where the machine has several nodes.
TEST(Placement, DummyStoreBindsExpertsToNodes) {
  const int nodes = numa_node_count();
  if (nodes < 2) GTEST_SKIP() << "one NUMA node: mbind placement needs a multi-node machine";
  auto store = WeightStore::dummy(preset_config("tiny"), 7, {LoadMode::kLoad, true, nodes, 1});
  int placed = 0;
  for (const MemoryRegion& r : store->regions()) placed += r.numa_node >= 0;
  EXPECT_EQ(placed, nodes);
  const TensorView& last = store->tensor("model.layers.2.mlp.experts.15.down_proj.weight");
  bool found = false;
  for (const MemoryRegion& r : store->regions()) {
    if (last.data >= r.data && last.data < r.data + r.bytes) {
      EXPECT_EQ(r.numa_node, nodes - 1);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(HostArena, MapsAndMoves) {
  HostArena a(3 << 20, -1, true);
  ASSERT_NE(a.data(), nullptr);
  std::memset(a.data(), 0x5A, a.size());
  HostArena b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(static_cast<unsigned char>(b.data()[b.size() - 1]), 0x5A);
  HostArena bound(1 << 20, 0, false);  // node 0 exists everywhere libnuma works
  std::memset(bound.data(), 1, bound.size());
  expect_error([] { HostArena bad(1 << 20, 4096, false); }, ErrorKind::kInvalidArgument,
               {"NUMA node 4096"});
}

}  // namespace
}  // namespace hymoe
