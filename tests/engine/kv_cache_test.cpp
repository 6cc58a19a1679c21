#include "hymoe/engine/kv_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "hymoe/common/error.h"

namespace hymoe {
namespace {

KvCacheShape small_shape() { return {.layers = 3, .kv_lora_rank = 8, .rope_dim = 4, .block_tokens = 4}; }

TEST(KvCache, BudgetDecidesBlocks) {
  auto s = small_shape();
  KvCache kv(s, s.bytes_per_block() * 5 + 7);
  EXPECT_EQ(kv.total_blocks(), 5);
  EXPECT_EQ(kv.capacity_tokens(), 20);
  EXPECT_THROW(KvCache(s, s.bytes_per_block() - 1), Error);
}

TEST(KvCache, ReserveRefusesWithoutPartialGrabAndReleaseReturns) {
  auto s = small_shape();
  KvCache kv(s, s.bytes_per_block() * 4);
  BlockTable a, b;
  EXPECT_TRUE(kv.reserve(a, 9));  // 3 blocks
  EXPECT_EQ(a.blocks.size(), 3u);
  EXPECT_FALSE(kv.reserve(b, 5));  // needs 2, 1 free
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(kv.free_blocks(), 1);
  EXPECT_TRUE(kv.reserve(a, 12));  // still 3 blocks
  EXPECT_DOUBLE_EQ(kv.usage(), 0.75);
  kv.release(a);
  EXPECT_EQ(kv.free_blocks(), 4);
  EXPECT_TRUE(kv.reserve(b, 16));
}

TEST(KvCache, RowsOfDifferentSequencesAndLayersNeverAlias) {
  auto s = small_shape();
  KvCache kv(s, s.bytes_per_block() * 6);
  BlockTable a, b;
  ASSERT_TRUE(kv.reserve(a, 10));
  ASSERT_TRUE(kv.reserve(b, 11));
  std::mt19937 rng(1);
  // Write a distinct pattern everywhere, then read it all back.
  auto value = [](int seq, int64_t layer, int64_t pos, int64_t i) {
    return static_cast<uint16_t>(seq * 10007 + layer * 1009 + pos * 31 + i);
  };
  for (int seq = 0; seq < 2; ++seq) {
    BlockTable& t = seq ? b : a;
    for (int64_t l = 0; l < s.layers; ++l)
      for (int64_t p = 0; p < (seq ? 11 : 10); ++p)
        for (int64_t i = 0; i < s.width(); ++i) kv.row(t, l, p)[i] = value(seq, l, p, i);
  }
  for (int seq = 0; seq < 2; ++seq) {
    const BlockTable& t = seq ? b : a;
    for (int64_t l = 0; l < s.layers; ++l)
      for (int64_t p = 0; p < (seq ? 11 : 10); ++p)
        for (int64_t i = 0; i < s.width(); ++i) ASSERT_EQ(kv.row(t, l, p)[i], value(seq, l, p, i));
  }
  std::set<int32_t> all(a.blocks.begin(), a.blocks.end());
  all.insert(b.blocks.begin(), b.blocks.end());
  EXPECT_EQ(all.size(), a.blocks.size() + b.blocks.size());
}

}  // namespace
}  // namespace hymoe

namespace hymoe {
namespace {

TEST(KvCache, ExternalMemoryHoldsTheSameLayout) {
  const KvCacheShape shape{.layers = 3, .kv_lora_rank = 8, .rope_dim = 4, .block_tokens = 2};
  const size_t budget = 5 * shape.bytes_per_block() + 7;
  ASSERT_EQ(KvCache::blocks_in(shape, budget), 5);
  std::vector<uint16_t> memory(static_cast<size_t>(5) * shape.bytes_per_block() / sizeof(uint16_t));
  KvCache own(shape, budget);
  KvCache ext(shape, budget, memory.data());
  EXPECT_FALSE(ext.owns_memory());
  EXPECT_TRUE(own.owns_memory());
  EXPECT_EQ(ext.base(), memory.data());
  BlockTable a, b;
  ASSERT_TRUE(own.reserve(a, 7));
  ASSERT_TRUE(ext.reserve(b, 7));
  for (int64_t layer = 0; layer < 3; ++layer) {
    for (int64_t pos = 0; pos < 7; ++pos) {
      // Same offset from the base in both pools, inside the caller's memory.
      EXPECT_EQ(own.row(a, layer, pos) - own.base(), ext.row(b, layer, pos) - ext.base());
      EXPECT_GE(ext.row(b, layer, pos), memory.data());
      EXPECT_LE(ext.row(b, layer, pos) + shape.width(), memory.data() + memory.size());
    }
  }
}

}  // namespace
}  // namespace hymoe
