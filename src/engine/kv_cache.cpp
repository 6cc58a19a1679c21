#include "hymoe/engine/kv_cache.h"

#include "hymoe/common/error.h"

namespace hymoe {

int64_t KvCache::blocks_in(const KvCacheShape& shape, size_t byte_budget) {
  const size_t per_block = shape.bytes_per_block();
  return per_block == 0 ? 0 : static_cast<int64_t>(byte_budget / per_block);
}

KvCache::KvCache(const KvCacheShape& shape, size_t byte_budget)
    : KvCache(shape, byte_budget, nullptr) {}

KvCache::KvCache(const KvCacheShape& shape, size_t byte_budget, uint16_t* memory) : shape_(shape) {
  HYMOE_CHECK(shape.layers > 0 && shape.kv_lora_rank > 0 && shape.rope_dim >= 0 && shape.block_tokens > 0,
              kInvalidArgument, "kv cache: bad shape (layers {}, kv_lora {}, rope {}, block {})",
              shape.layers, shape.kv_lora_rank, shape.rope_dim, shape.block_tokens);
  const size_t per_block = shape.bytes_per_block();
  total_blocks_ = static_cast<int64_t>(byte_budget / per_block);
  HYMOE_CHECK(total_blocks_ > 0, kResourceExhausted,
              "kv cache: a budget of {} bytes holds no block of {} bytes", byte_budget, per_block);
  if (memory) {
    base_ = memory;
  } else {
    data_ = std::make_unique<uint16_t[]>(static_cast<size_t>(total_blocks_) * per_block / sizeof(uint16_t));
    base_ = data_.get();
  }
  free_.reserve(static_cast<size_t>(total_blocks_));
  for (int64_t b = total_blocks_ - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

double KvCache::usage() const {
  return 1.0 - static_cast<double>(free_.size()) / static_cast<double>(total_blocks_);
}

int64_t KvCache::blocks_for(int64_t tokens) const {
  return (tokens + shape_.block_tokens - 1) / shape_.block_tokens;
}

bool KvCache::reserve(BlockTable& table, int64_t tokens) {
  const int64_t need = blocks_for(tokens) - static_cast<int64_t>(table.blocks.size());
  if (need <= 0) return true;
  if (need > static_cast<int64_t>(free_.size())) return false;
  for (int64_t i = 0; i < need; ++i) {
    table.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvCache::release(BlockTable& table) {
  for (int32_t b : table.blocks) free_.push_back(b);
  table.blocks.clear();
  table.tokens = 0;
}

uint16_t* KvCache::block_rows(int32_t block, int64_t layer) {
  const int64_t rows_per_layer = total_blocks_ * shape_.block_tokens;
  return base_ + (layer * rows_per_layer + static_cast<int64_t>(block) * shape_.block_tokens) * shape_.width();
}

uint16_t* KvCache::row(const BlockTable& table, int64_t layer, int64_t position) {
  const int64_t bi = position / shape_.block_tokens;
  return block_rows(table.blocks[static_cast<size_t>(bi)], layer) + (position % shape_.block_tokens) * shape_.width();
}

const uint16_t* KvCache::row(const BlockTable& table, int64_t layer, int64_t position) const {
  return const_cast<KvCache*>(this)->row(table, layer, position);
}

}  // namespace hymoe
