// Paged latent KV cache of MLA. Per token and layer it stores the normalised compressed KV
// (kv_lora_rank values) followed by the roped k_pe (qk_rope_head_dim values), in BF16.
// Memory is a pool of blocks of `block_tokens` tokens; a block id names the same slot in every
// layer, so one block table per sequence serves all layers. The pool has a byte budget fixed at
// construction; a sequence that does not fit is refused (reserve() returns false), never crashes.
//
// Layout: data[layer][block][token_in_block][width], width = kv_lora_rank + qk_rope_head_dim.
// The pool lives in host memory (the CPU engine) or in memory the caller owns, e.g. device
// memory for the GPU paths: the same layout, and row()/block_rows() give addresses in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t capacity_tokens() const { return total_blocks_ * shape_.block_tokens; }
  double usage() const;  // used blocks / total blocks, 0..1
  // Layer 0's first row; layer l starts capacity_tokens() * width() values further on.
  uint16_t* base() const { return base_; }
  bool owns_memory() const { return data_ != nullptr; }  // host memory of its own

  // Blocks needed to hold `tokens` tokens in total.
  int64_t blocks_for(int64_t tokens) const;
  // Grows `table` so it can hold `tokens` tokens; false (table unchanged) when not enough
  // blocks are free.
  bool reserve(BlockTable& table, int64_t tokens);
  // Returns every block of `table` to the pool and clears it.
  void release(BlockTable& table);

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
};

}  // namespace hymoe
