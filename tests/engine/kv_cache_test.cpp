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
