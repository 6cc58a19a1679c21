#include "bpe.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "hymoe/common/error.h"

namespace hymoe::tokenizer {

// ---- PairTable ----------------------------------------------------------------------------

void PairTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  mask_ = cap - 1;
  count_ = 0;
}

void PairTable::grow() {
  std::vector<Entry> old = std::move(slots_);
  reserve(std::max<size_t>(16, old.size()));
  for (const Entry& e : old) {
    if (e.key != kEmpty) insert(TokenId(e.key >> 32), TokenId(uint32_t(e.key)), e.rank, e.merged);
  }
}

void PairTable::insert(TokenId a, TokenId b, int32_t rank, TokenId merged) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = make_key(a, b);
  size_t i = hash(key) & mask_;
  for (;;) {
    Entry& e = slots_[i];
    if (e.key == kEmpty) {
      e = Entry{key, rank, merged};
      ++count_;
      return;
    }
    if (e.key == key) {
      if (rank < e.rank) e = Entry{key, rank, merged};
      return;
    }
    i = (i + 1) & mask_;
  }
}

// ---- BytesMap -----------------------------------------------------------------------------

size_t BytesMap::hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then a final mix
  for (char c : s) h = (h ^ uint8_t(c)) * 0x100000001b3ULL;
  h ^= h >> 29;
  return static_cast<size_t>(h);
}

void BytesMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  count_ = 0;
}

void BytesMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  reserve(std::max<size_t>(16, old.size()));
  for (const Slot& s : old) {
    if (s.id >= 0) insert(s.key, s.id);
  }
}

void BytesMap::insert(std::string_view bytes, TokenId id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  size_t i = hash(bytes) & mask_;
  for (;;) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      s = Slot{bytes, id};
      ++count_;
      return;
    }
    if (s.key == bytes) return;  // first id wins
    i = (i + 1) & mask_;
  }
}

const TokenId* BytesMap::find(std::string_view bytes) const {
  if (slots_.empty()) return nullptr;
  size_t i = hash(bytes) & mask_;
  for (;;) {
    const Slot& s = slots_[i];
    if (s.id < 0) return nullptr;
    if (s.key == bytes) return &s.id;
    i = (i + 1) & mask_;
  }
}

// ---- BpeModel -----------------------------------------------------------------------------

void BpeModel::set_token(TokenId id, std::string bytes) {
  const size_t i = static_cast<size_t>(id);
  if (i >= storage_.size()) {
    storage_.resize(i + 1);
    defined_.resize(i + 1, false);
  }
  storage_[i] = std::move(bytes);
  defined_[i] = true;
}

void BpeModel::finish(std::string_view what) {
  views_.assign(storage_.begin(), storage_.end());
  by_bytes_.reserve(views_.size());
  for (size_t i = 0; i < views_.size(); ++i) {
    if (defined_[i]) by_bytes_.insert(views_[i], TokenId(i));
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const TokenId* id = by_bytes_.find(std::string_view(&c, 1));
    HYMOE_CHECK(id != nullptr, kCorruptData, "{}: no token for the single byte 0x{:02x}", what, b);
    byte_ids_[b] = *id;
  }
}

void BpeModel::encode_piece(std::string_view piece, std::vector<TokenId>& out, Work& w) const {
  const size_t n = piece.size();
  if (n == 0) return;
  if (n == 1) {
    out.push_back(byte_ids_[uint8_t(piece[0])]);
    return;
  }
  if (n > 24) {
    encode_long(piece, out, w);
    return;
  }
  // Short pieces: arrays with the rank of each adjacent pair; a merge shifts the tail left.
  constexpr int32_t kNone = INT32_MAX;
  TokenId ids[96];
  int32_t ranks[96];
  TokenId merged[96];
  size_t m = n;
  for (size_t i = 0; i < n; ++i) ids[i] = byte_ids_[uint8_t(piece[i])];
  auto rank_at = [&](size_t i) {
    const PairTable::Entry* e = pairs_.find(ids[i], ids[i + 1]);
    ranks[i] = e ? e->rank : kNone;
    merged[i] = e ? e->merged : -1;
  };
  for (size_t i = 0; i + 1 < m; ++i) rank_at(i);
  while (m > 1) {
    size_t best = 0;
    int32_t best_rank = ranks[0];
    for (size_t i = 1; i + 1 < m; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == kNone) break;
    ids[best] = merged[best];
    const size_t tail = m - best - 2;  // symbols after the absorbed right one
    std::memmove(ids + best + 1, ids + best + 2, tail * sizeof(TokenId));
    std::memmove(ranks + best + 1, ranks + best + 2, (tail > 0 ? tail - 1 : 0) * sizeof(int32_t));
    std::memmove(merged + best + 1, merged + best + 2, (tail > 0 ? tail - 1 : 0) * sizeof(TokenId));
    --m;
    if (best > 0) rank_at(best - 1);
    if (best + 1 < m) rank_at(best);
  }
  out.insert(out.end(), ids, ids + m);
}

void BpeModel::encode_long(std::string_view piece, std::vector<TokenId>& out, Work& w) const {
  // Long pieces: a doubly linked list of symbols and a min-heap of (rank, position); entries
  // whose pair has changed since they were pushed are skipped when popped.
  const size_t n = piece.size();
  w.ids.resize(n);
  w.next.resize(n);
  w.prev.resize(n);
  w.heap.clear();
  for (size_t i = 0; i < n; ++i) {
    w.ids[i] = byte_ids_[uint8_t(piece[i])];
    w.next[i] = i + 1 < n ? int32_t(i + 1) : -1;
    w.prev[i] = int32_t(i) - 1;
  }
  auto push = [&](int32_t pos) {
    const int32_t r = w.next[pos];
    if (r < 0) return;
    const PairTable::Entry* e = pairs_.find(w.ids[pos], w.ids[r]);
    if (e) w.heap.push_back((uint64_t(uint32_t(e->rank)) << 32) | uint32_t(pos));
  };
  std::greater<uint64_t> cmp;
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  std::make_heap(w.heap.begin(), w.heap.end(), cmp);
  while (!w.heap.empty()) {
    std::pop_heap(w.heap.begin(), w.heap.end(), cmp);
    const uint64_t top = w.heap.back();
    w.heap.pop_back();
    const int32_t pos = int32_t(uint32_t(top));
    const int32_t rank = int32_t(top >> 32);
    if (w.ids[pos] < 0) continue;
    const int32_t r = w.next[pos];
    if (r < 0) continue;
    const PairTable::Entry* e = pairs_.find(w.ids[pos], w.ids[r]);
    if (!e || e->rank != rank) continue;  // stale
    w.ids[pos] = e->merged;
    w.ids[r] = -1;
    w.next[pos] = w.next[r];
    if (w.next[r] >= 0) w.prev[w.next[r]] = pos;
    auto push_heap = [&](int32_t p) {
      const size_t before = w.heap.size();
      push(p);
      if (w.heap.size() != before) std::push_heap(w.heap.begin(), w.heap.end(), cmp);
    };
    if (w.prev[pos] >= 0) push_heap(w.prev[pos]);
    push_heap(pos);
  }
  for (int32_t i = 0; i >= 0; i = w.next[i]) out.push_back(w.ids[i]);
}

}  // namespace hymoe::tokenizer
