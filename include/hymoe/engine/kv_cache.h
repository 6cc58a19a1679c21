// Paged latent KV cache of MLA. Per token and layer it stores the normalised compressed KV
// (kv_lora_rank values) followed by the roped k_pe (qk_rope_head_dim values), in BF16.
// Memory is a pool of blocks of `block_tokens` tokens; a block id names the same slot in every
// layer, so one block table per sequence serves all layers. The pool has a byte budget fixed at
// construction; a sequence that does not fit is refused (reserve() returns false), never crashes.
//
// Layout: data[layer][block][token_in_block][width], width = kv_lora_rank + qk_rope_head_dim.
// The pool lives in host memory (the CPU engine) or in memory the caller owns, e.g. device
// memory for the GPU paths: the same layout, and row()/block_rows() give addresses in it.
//
// Prefix cache: a full block whose every token id is known can be published under a chain key
// (hash of its parent's key and its own tokens, so the key covers every token up to and
// including the block). A later sequence whose tokens start with the same blocks takes them
// (take_prefix) instead of recomputing them. Blocks carry reference counts: a block held by no
// table stays cached, in LRU order, until reserve() needs it (evicted only then, and never while
// a table holds it). Published blocks are read-only: a table only writes past its shared
// blocks (the scheduler never takes a prompt's last token from the cache, so logits exist).
// A hit is exact, not probabilistic: the key is only an index; a match also compares the
// block's tokens and requires that its parent is the very block (same incarnation) matched
// before it. The cache is only block ids, so it serves a device pool the same way.
// Numerics: prompt tokens take one kernel path however they are chunked, so a request served from
// cached prompt blocks gets bitwise the logits of a cold run. Blocks of generated tokens were
// written by the decode kernels, which sum in another order: a later turn that takes them agrees
// with a cold run to summation order, not bitwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

namespace hymoe {

struct KvCacheShape {
  int64_t layers = 0;
  int64_t kv_lora_rank = 0;
  int64_t rope_dim = 0;
  int64_t block_tokens = 64;
  int64_t width() const { return kv_lora_rank + rope_dim; }
  size_t bytes_per_block() const {
    return static_cast<size_t>(layers * block_tokens * width()) * sizeof(uint16_t);
  }
};

// The blocks of one sequence and how many tokens they hold.
struct BlockTable {
  std::vector<int32_t> blocks;
  int64_t tokens = 0;  // tokens written (positions 0..tokens-1)
  // Leading blocks that are in the prefix cache (taken from it or published): read-only, maybe
  // held by other tables too. The executors never see the difference: they write from
  // `tokens` on, which is past these.
  int64_t shared = 0;
  bool sealed = false;  // publish() stopped here (an equal block was already cached)
};

class KvCache {
 public:
  // Throws hymoe::Error (kResourceExhausted) when the budget cannot hold a single block, or
  // (kInvalidArgument) for a malformed shape.
  KvCache(const KvCacheShape& shape, size_t byte_budget);
  // The pool in `memory`, owned by the caller and at least blocks_in(shape, byte_budget) *
  // shape.bytes_per_block() bytes, which must outlive the cache (device memory of a GPU path).
  KvCache(const KvCacheShape& shape, size_t byte_budget, uint16_t* memory);
  // Blocks a budget holds (0 when not one).
  static int64_t blocks_in(const KvCacheShape& shape, size_t byte_budget);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  int64_t total_blocks() const { return total_blocks_; }
  // Blocks reserve() can take: free ones and cached blocks no table holds (evictable).
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()) + lru_size_; }
  int64_t capacity_tokens() const { return total_blocks_ * shape_.block_tokens; }
  double usage() const;  // blocks held by tables / total blocks, 0..1
  // Layer 0's first row; layer l starts capacity_tokens() * width() values further on.
  uint16_t* base() const { return base_; }
  bool owns_memory() const { return data_ != nullptr; }  // host memory of its own

  // Blocks needed to hold `tokens` tokens in total.
  int64_t blocks_for(int64_t tokens) const;
  // Grows `table` so it can hold `tokens` tokens; false (table unchanged) when not enough
  // blocks are free. Evicts the least recently used unheld cached blocks when the free list
  // runs out.
  bool reserve(BlockTable& table, int64_t tokens);
  // Drops the table's reference on every block (a block no table holds goes back to the free
  // list, or, when cached, to the LRU end of the evictable ones) and clears the table. Last block
  // first, so that a sequence's tail is evicted before its head, which other prompts are likelier
  // to share.
  void release(BlockTable& table);

  // ---- prefix cache
  // Takes into the empty `table` the cached blocks holding the longest run of whole blocks
  // that `tokens` starts with, up to `max_tokens` tokens; sets table.tokens and table.shared to
  // what it took and returns the number of tokens (a multiple of block_tokens, maybe 0).
  int64_t take_prefix(BlockTable& table, std::span<const int32_t> tokens, int64_t max_tokens);
  // Publishes the table's full blocks past table.shared whose KV is written and whose ids
  // `tokens` holds (positions [0, min(table.tokens, tokens.size()))). Cheap when there is
  // nothing new. A block equal to one already cached stays private, and so do the table's later
  // blocks (their parent is not in the cache): `sealed`.
  void publish(BlockTable& table, std::span<const int32_t> tokens);
  int64_t cached_blocks() const { return static_cast<int64_t>(index_.size()); }  // held or not
  int64_t evictions() const { return evictions_; }
  int32_t references(int32_t block) const { return ref_[static_cast<size_t>(block)]; }
  // The chain key of a block of `block_tokens` ids after a parent's key (kRootKey for the first).
  static uint64_t chain_key(uint64_t parent_key, std::span<const int32_t> block_tokens);
  static constexpr uint64_t kRootKey = 0x6879'6d6f'6500'0001ull;
  // Keeps only the low `bits` bits of every key from now on, so that tests can make different
  // prefixes share keys (a hit must still be exact). Call before anything is published.
  void narrow_keys_for_testing(int bits) { key_mask_ = bits >= 64 ? ~0ull : (1ull << bits) - 1; }

  // The row of (layer, position) of a sequence: width BF16 values (c_kv then k_pe).
  uint16_t* row(const BlockTable& table, int64_t layer, int64_t position);
  const uint16_t* row(const BlockTable& table, int64_t layer, int64_t position) const;
  // The first row of a block in a layer (block_tokens consecutive rows).
  uint16_t* block_rows(int32_t block, int64_t layer);

 private:
  KvCacheShape shape_;
  int64_t total_blocks_ = 0;
  std::unique_ptr<uint16_t[]> data_;  // the pool, where the cache owns it
  uint16_t* base_ = nullptr;
  std::vector<int32_t> free_;  // stack of free block ids

  // Per block (total_blocks_ each).
  void hold(int32_t block);       // one more reference (out of the LRU list when it was unheld)
  void lru_unlink(int32_t block);
  void lru_push_back(int32_t block);
  int32_t evict_oldest();         // unpublishes the LRU block and returns it
  bool matches(int32_t block, int32_t parent, std::span<const int32_t> tokens) const;
  std::vector<int32_t> ref_;           // tables holding the block
  std::vector<uint8_t> cached_;        // published (in index_)
  std::vector<uint64_t> key_;          // chain key, while cached
  std::vector<int32_t> parent_;        // the cached block before it (-1 for a first block)
  std::vector<uint32_t> parent_gen_;   // the parent's incarnation when this one was published
  std::vector<uint32_t> gen_;          // incarnation: bumped when a cached block is evicted
  std::vector<int32_t> block_ids_;     // [block][block_tokens] token ids, while cached
  std::vector<int32_t> lru_prev_, lru_next_;  // unheld cached blocks, oldest first
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int64_t lru_size_ = 0;
  int64_t evictions_ = 0;
  uint64_t key_mask_ = ~0ull;
  std::unordered_map<uint64_t, int32_t> index_;  // chain key -> block
};

// Rows of the pool (in every layer's part: row = block * block_tokens + offset) that hold tokens
// [begin, end) of `table`, merged where consecutive blocks follow each other: what a copy of a
// sequence's KV between two devices' pools of the same shape moves.
struct KvRowRun {
  int64_t row = 0, count = 0;
};
std::vector<KvRowRun> kv_row_runs(const BlockTable& table, int64_t begin, int64_t end, int64_t block_tokens);

}  // namespace hymoe
