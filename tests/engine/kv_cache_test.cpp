#include "hymoe/engine/kv_cache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <vector>

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

// ---- prefix cache
namespace hymoe {
namespace {

// Every row of a position holds (token, position, layer): what any sequence with that token at
// that position would write, so rows of shared blocks can be checked like private ones.
void write_rows(KvCache& kv, const BlockTable& t, std::span<const int32_t> tokens, int64_t from, int64_t to) {
  for (int64_t l = 0; l < kv.shape().layers; ++l)
    for (int64_t p = from; p < to; ++p) {
      uint16_t* r = kv.row(t, l, p);
      r[0] = static_cast<uint16_t>(tokens[static_cast<size_t>(p)]);
      r[1] = static_cast<uint16_t>(p);
      r[2] = static_cast<uint16_t>(l);
    }
}
bool rows_hold(const KvCache& kv, const BlockTable& t, std::span<const int32_t> tokens, int64_t to) {
  for (int64_t l = 0; l < kv.shape().layers; ++l)
    for (int64_t p = 0; p < to; ++p) {
      const uint16_t* r = kv.row(t, l, p);
      if (r[0] != static_cast<uint16_t>(tokens[static_cast<size_t>(p)]) || r[1] != p || r[2] != l) return false;
    }
  return true;
}
// A sequence's life: take the cached prefix (never the last token), reserve, write the rest,
// publish.
int64_t admit_and_fill(KvCache& kv, BlockTable& t, const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t hit = kv.take_prefix(t, tokens, n - 1);
  if (!kv.reserve(t, n)) {
    kv.release(t);
    return -1;
  }
  write_rows(kv, t, tokens, t.tokens, n);
  t.tokens = n;
  kv.publish(t, tokens);
  return hit;
}

TEST(KvCachePrefix, SharesWholeBlocksOfAnEqualPrefixWithReferenceCounts) {
  auto s = small_shape();  // 4 tokens a block
  KvCache kv(s, s.bytes_per_block() * 10);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  BlockTable ta;
  EXPECT_EQ(admit_and_fill(kv, ta, a), 0);
  EXPECT_EQ(ta.shared, 2);  // the third block is partial: private
  EXPECT_EQ(kv.cached_blocks(), 2);
  // Same first 9 tokens: both full blocks; the partial one is its own.
  std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 7, 8, 9, 99, 98};
  BlockTable tb;
  EXPECT_EQ(admit_and_fill(kv, tb, b), 8);
  EXPECT_EQ(tb.blocks[0], ta.blocks[0]);
  EXPECT_EQ(tb.blocks[1], ta.blocks[1]);
  EXPECT_NE(tb.blocks[2], ta.blocks[2]);
  EXPECT_EQ(kv.references(ta.blocks[0]), 2);
  EXPECT_TRUE(rows_hold(kv, ta, a, 10));
  EXPECT_TRUE(rows_hold(kv, tb, b, 11));
  // A different second block: only the first is shared. The same second block after a
  // different first one: nothing (the key covers every token before it).
  BlockTable tc, td;
  EXPECT_EQ(admit_and_fill(kv, tc, {1, 2, 3, 4, 5, 6, 0, 8, 9}), 4);
  EXPECT_EQ(admit_and_fill(kv, td, {0, 2, 3, 4, 5, 6, 7, 8, 9}), 0);
  // An 8-token prompt equal to a's first two blocks keeps its last token to compute: one block.
  BlockTable te;
  ASSERT_EQ(kv.free_blocks(), 10 - 3 - 1 - 2 - 3);
  EXPECT_EQ(kv.take_prefix(te, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}, 7), 4);
  kv.release(te);
  for (BlockTable* t : {&ta, &tb, &tc, &td}) kv.release(*t);
  for (int32_t blk = 0; blk < 10; ++blk) EXPECT_EQ(kv.references(blk), 0) << blk;
  EXPECT_EQ(kv.free_blocks(), 10);     // cached blocks no table holds are free to reuse
  EXPECT_DOUBLE_EQ(kv.usage(), 0.0);
  EXPECT_GT(kv.cached_blocks(), 0);
  // Cached blocks outlive their tables: a later equal prompt hits.
  BlockTable tf;
  EXPECT_EQ(admit_and_fill(kv, tf, a), 8);
  kv.release(tf);
}

TEST(KvCachePrefix, GeneratedTokensPublishOnceTheirBlockIsFull) {
  auto s = small_shape();
  KvCache kv(s, s.bytes_per_block() * 6);
  std::vector<int32_t> seq = {5, 6, 7};  // prompt, then decode one token at a time
  BlockTable t;
  ASSERT_EQ(admit_and_fill(kv, t, seq), 0);
  for (int32_t g = 20; g < 26; ++g) {
    seq.push_back(g);  // sampled: its id is known, its KV not yet written
    kv.publish(t, seq);
    EXPECT_EQ(t.shared, t.tokens / 4);
    ASSERT_TRUE(kv.reserve(t, t.tokens + 1));
    write_rows(kv, t, seq, t.tokens, t.tokens + 1);
    ++t.tokens;
    kv.publish(t, seq);
  }
  EXPECT_EQ(t.tokens, 9);
  EXPECT_EQ(t.shared, 2);
  kv.release(t);
  // The next turn re-sends prompt + output + more: both blocks hit.
  std::vector<int32_t> next = seq;
  next.insert(next.end(), {40, 41, 42});
  BlockTable n;
  EXPECT_EQ(admit_and_fill(kv, n, next), 8);
  EXPECT_TRUE(rows_hold(kv, n, next, static_cast<int64_t>(next.size())));
  kv.release(n);
}

// Many sequences over a pool too small for all of them, with prefixes drawn from a few stems:
// a block a table holds is never handed to another (every row keeps its own token and
// position), hits are exact even with keys cut to 2 bits (collisions on nearly every block),
// reference counts equal the tables holding each block, and all return to zero.
void stress(int key_bits, uint32_t seed) {
  std::printf("prefix cache stress: key bits %d, seed %u\n", key_bits, seed);
  auto s = small_shape();
  const int64_t blocks = 24;
  KvCache kv(s, s.bytes_per_block() * blocks);
  kv.narrow_keys_for_testing(key_bits);
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> stems;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> st(12);
    for (auto& x : st) x = static_cast<int32_t>(rng() % 5);
    stems.push_back(st);
  }
  struct Live {
    BlockTable t;
    std::vector<int32_t> tokens;
  };
  std::vector<std::unique_ptr<Live>> live;
  int64_t hits = 0;
  for (int round = 0; round < 3000; ++round) {
    if (!live.empty() && (rng() % 3 == 0 || kv.free_blocks() < 4)) {
      const size_t k = rng() % live.size();
      kv.release(live[k]->t);
      live.erase(live.begin() + static_cast<ptrdiff_t>(k));
    } else if (!live.empty() && rng() % 2 == 0) {
      // Decode a token into one of them.
      Live& l = *live[rng() % live.size()];
      l.tokens.push_back(static_cast<int32_t>(rng() % 5));
      if (kv.reserve(l.t, l.t.tokens + 1)) {
        write_rows(kv, l.t, l.tokens, l.t.tokens, l.t.tokens + 1);
        ++l.t.tokens;
        kv.publish(l.t, l.tokens);
      } else {
        l.tokens.pop_back();
      }
    } else {
      auto l = std::make_unique<Live>();
      l->tokens = stems[rng() % stems.size()];
      l->tokens.resize(1 + rng() % 12);
      for (int k = static_cast<int>(rng() % 6); k > 0; --k) l->tokens.push_back(static_cast<int32_t>(rng() % 5));
      const int64_t hit = admit_and_fill(kv, l->t, l->tokens);
      if (hit < 0) continue;
      hits += hit;
      live.push_back(std::move(l));
    }
    std::vector<int32_t> refs(static_cast<size_t>(blocks), 0);
    for (const auto& l : live) {
      ASSERT_TRUE(rows_hold(kv, l->t, l->tokens, l->t.tokens)) << "round " << round;
      for (int32_t b : l->t.blocks) ++refs[static_cast<size_t>(b)];
    }
    for (int32_t b = 0; b < blocks; ++b) ASSERT_EQ(kv.references(b), refs[static_cast<size_t>(b)]) << "round " << round;
  }
  for (auto& l : live) kv.release(l->t);
  for (int32_t b = 0; b < blocks; ++b) EXPECT_EQ(kv.references(b), 0);
  EXPECT_EQ(kv.free_blocks(), blocks);
  EXPECT_GT(hits, 0);
  EXPECT_GT(kv.evictions(), 0);
}

TEST(KvCachePrefix, EvictionNeverTakesAHeldBlock) { stress(64, 11); }
TEST(KvCachePrefix, KeyCollisionsNeverGiveAWrongHit) { stress(2, 12); }

// The pool rows of a token range: each token lands on its block's row, consecutive blocks merge.
TEST(KvRowRuns, MapTokensToPoolRowsMergingConsecutiveBlocks) {
  BlockTable t;
  t.blocks = {4, 5, 9, 2, 3};
  const int64_t bt = 8;
  auto runs = kv_row_runs(t, 0, 40, bt);
  ASSERT_EQ(runs.size(), 3u);  // 4-5, 9, 2-3
  EXPECT_EQ(runs[0].row, 32);
  EXPECT_EQ(runs[0].count, 16);
  EXPECT_EQ(runs[1].row, 72);
  EXPECT_EQ(runs[1].count, 8);
  EXPECT_EQ(runs[2].row, 16);
  EXPECT_EQ(runs[2].count, 16);
  // Partial blocks at both ends.
  runs = kv_row_runs(t, 3, 19, bt);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].row, 35);  // block 4, offset 3 .. block 5's end
  EXPECT_EQ(runs[0].count, 13);
  EXPECT_EQ(runs[1].row, 72);  // block 9, offsets 0..2
  EXPECT_EQ(runs[1].count, 3);
  EXPECT_TRUE(kv_row_runs(t, 7, 7, bt).empty());
  // Every token of every range maps to exactly its row.
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const int64_t a = std::uniform_int_distribution<int64_t>(0, 40)(rng);
    const int64_t b = std::uniform_int_distribution<int64_t>(a, 40)(rng);
    std::vector<int64_t> rows;
    for (const KvRowRun& r : kv_row_runs(t, a, b, bt))
      for (int64_t k = 0; k < r.count; ++k) rows.push_back(r.row + k);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), b - a);
    for (int64_t tok = a; tok < b; ++tok)
      ASSERT_EQ(rows[static_cast<size_t>(tok - a)], t.blocks[static_cast<size_t>(tok / bt)] * bt + tok % bt);
  }
  EXPECT_THROW(kv_row_runs(t, 0, 41, bt), Error);
  EXPECT_THROW(kv_row_runs(t, 5, 4, bt), Error);
}

}  // namespace
}  // namespace hymoe
