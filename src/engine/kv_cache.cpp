#include "hymoe/engine/kv_cache.h"

#include <algorithm>

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
  const size_t n = static_cast<size_t>(total_blocks_);
  ref_.assign(n, 0);
  cached_.assign(n, 0);
  key_.assign(n, 0);
  parent_.assign(n, -1);
  parent_gen_.assign(n, 0);
  gen_.assign(n, 0);
  block_ids_.assign(n * static_cast<size_t>(shape.block_tokens), 0);
  lru_prev_.assign(n, -1);
  lru_next_.assign(n, -1);
  index_.reserve(n);
}

double KvCache::usage() const {
  return 1.0 - static_cast<double>(free_blocks()) / static_cast<double>(total_blocks_);
}

int64_t KvCache::blocks_for(int64_t tokens) const {
  return (tokens + shape_.block_tokens - 1) / shape_.block_tokens;
}

bool KvCache::reserve(BlockTable& table, int64_t tokens) {
  const int64_t need = blocks_for(tokens) - static_cast<int64_t>(table.blocks.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) {
    int32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = evict_oldest();
    }
    ref_[static_cast<size_t>(b)] = 1;
    table.blocks.push_back(b);
  }
  return true;
}

void KvCache::release(BlockTable& table) {
  // Last block first: of one sequence's cached blocks the tail is evicted before the head,
  // which other prompts are likelier to share.
  for (auto it = table.blocks.rbegin(); it != table.blocks.rend(); ++it) {
    const int32_t b = *it;
    const size_t i = static_cast<size_t>(b);
    if (--ref_[i] > 0) continue;
    if (cached_[i]) {
      lru_push_back(b);
    } else {
      free_.push_back(b);
    }
  }
  table.blocks.clear();
  table.tokens = 0;
  table.shared = 0;
  table.sealed = false;
}

uint64_t KvCache::chain_key(uint64_t parent_key, std::span<const int32_t> block_tokens) {
  // An index, not the identity (matches() compares tokens and parent): it needs spread, not
  // cryptographic strength. Per token a multiply-xorshift step, then a murmur3 finaliser.
  uint64_t h = parent_key ^ (0x9E3779B97F4A7C15ull * (block_tokens.size() + 1));
  for (int32_t t : block_tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

void KvCache::lru_unlink(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  const int32_t p = lru_prev_[i], n = lru_next_[i];
  (p >= 0 ? lru_next_[static_cast<size_t>(p)] : lru_head_) = n;
  (n >= 0 ? lru_prev_[static_cast<size_t>(n)] : lru_tail_) = p;
  lru_prev_[i] = lru_next_[i] = -1;
  --lru_size_;
}

void KvCache::lru_push_back(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  lru_prev_[i] = lru_tail_;
  lru_next_[i] = -1;
  (lru_tail_ >= 0 ? lru_next_[static_cast<size_t>(lru_tail_)] : lru_head_) = b;
  lru_tail_ = b;
  ++lru_size_;
}

void KvCache::hold(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  if (ref_[i]++ == 0) lru_unlink(b);  // an unheld block found in the index is on the LRU list
}

int32_t KvCache::evict_oldest() {
  const int32_t b = lru_head_;
  HYMOE_CHECK(b >= 0, kInternal, "kv cache: nothing to evict");
  lru_unlink(b);
  const size_t i = static_cast<size_t>(b);
  auto it = index_.find(key_[i]);
  if (it != index_.end() && it->second == b) index_.erase(it);
  cached_[i] = 0;
  ++gen_[i];  // blocks published under this one no longer match it
  ++evictions_;
  return b;
}

bool KvCache::matches(int32_t b, int32_t parent, std::span<const int32_t> tokens) const {
  const size_t i = static_cast<size_t>(b);
  if (!cached_[i] || parent_[i] != parent) return false;
  if (parent >= 0 && parent_gen_[i] != gen_[static_cast<size_t>(parent)]) return false;
  const int32_t* ids = block_ids_.data() + i * static_cast<size_t>(shape_.block_tokens);
  return std::equal(tokens.begin(), tokens.end(), ids);
}

int64_t KvCache::take_prefix(BlockTable& table, std::span<const int32_t> tokens, int64_t max_tokens) {
  HYMOE_CHECK(table.blocks.empty(), kInternal, "kv cache: take_prefix into a table that holds blocks");
  const int64_t B = shape_.block_tokens;
  const int64_t full = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size())) / B;
  uint64_t key = kRootKey;
  int32_t parent = -1;
  for (int64_t k = 0; k < full; ++k) {
    const auto ids = tokens.subspan(static_cast<size_t>(k * B), static_cast<size_t>(B));
    key = chain_key(key, ids) & key_mask_;
    auto it = index_.find(key);
    if (it == index_.end() || !matches(it->second, parent, ids)) break;
    parent = it->second;
    hold(parent);
    table.blocks.push_back(parent);
  }
  table.shared = static_cast<int64_t>(table.blocks.size());
  table.tokens = table.shared * B;
  return table.tokens;
}

void KvCache::publish(BlockTable& table, std::span<const int32_t> tokens) {
  if (table.sealed) return;
  const int64_t B = shape_.block_tokens;
  const int64_t full = std::min<int64_t>(table.tokens, static_cast<int64_t>(tokens.size())) / B;
  for (int64_t k = table.shared; k < full; ++k) {
    const int32_t b = table.blocks[static_cast<size_t>(k)];
    const int32_t parent = k > 0 ? table.blocks[static_cast<size_t>(k - 1)] : -1;
    const auto ids = tokens.subspan(static_cast<size_t>(k * B), static_cast<size_t>(B));
    const uint64_t key = chain_key(parent >= 0 ? key_[static_cast<size_t>(parent)] : kRootKey, ids) & key_mask_;
    auto [it, inserted] = index_.emplace(key, b);
    if (!inserted) {
      // The key is taken: by a twin (the same tokens after the same parent, published first),
      // by a block whose parent was evicted since (stale), or by other tokens (a collision).
      // One no table holds gives way (this block replaces it). One held by a table stays, and
      // this block stays private with the table's later ones (their parent is not cached):
      // swapping the twin in would change this sequence's later results by summation order
      // where the twin's rows came from other kernels (decode vs prefill).
      const int32_t old = it->second;
      if (ref_[static_cast<size_t>(old)] > 0) {
        table.sealed = true;
        return;
      }
      lru_unlink(old);
      cached_[static_cast<size_t>(old)] = 0;
      ++gen_[static_cast<size_t>(old)];
      free_.push_back(old);
      it->second = b;
    }
    const size_t i = static_cast<size_t>(b);
    cached_[i] = 1;
    key_[i] = key;
    parent_[i] = parent;
    parent_gen_[i] = parent >= 0 ? gen_[static_cast<size_t>(parent)] : 0;
    std::copy(ids.begin(), ids.end(), block_ids_.begin() + static_cast<ptrdiff_t>(i * static_cast<size_t>(B)));
    table.shared = k + 1;
  }
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

std::vector<KvRowRun> kv_row_runs(const BlockTable& table, int64_t begin, int64_t end, int64_t block_tokens) {
  HYMOE_CHECK(block_tokens > 0 && begin >= 0 && begin <= end &&
                  end <= static_cast<int64_t>(table.blocks.size()) * block_tokens,
              kInvalidArgument, "kv_row_runs: tokens [{}, {}) of a table of {} blocks of {}", begin, end,
              table.blocks.size(), block_tokens);
  std::vector<KvRowRun> runs;
  for (int64_t t = begin; t < end;) {
    const int64_t b = t / block_tokens, offset = t % block_tokens;
    const int64_t n = std::min(end - t, block_tokens - offset);
    const int64_t row = static_cast<int64_t>(table.blocks[static_cast<size_t>(b)]) * block_tokens + offset;
    if (!runs.empty() && runs.back().row + runs.back().count == row) {
      runs.back().count += n;
    } else {
      runs.push_back({row, n});
    }
    t += n;
  }
  return runs;
}

}  // namespace hymoe
