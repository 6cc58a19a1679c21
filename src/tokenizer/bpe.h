// Byte-pair encoding over raw bytes: the vocabulary (id <-> bytes) and the merge table, shared by
// the tokenizer.json and tiktoken formats.
//
// Both formats reduce to one rule: start from one symbol per byte, then repeatedly merge the
// adjacent pair with the lowest rank (leftmost on ties) until no pair has a rank.
//   tokenizer.json: rank of (a, b) = index of "a b" in `merges`, result = vocab[a + b].
//   tiktoken:       rank of (a, b) = rank of the bytes a + b, result = that token.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::tokenizer {

// Open-addressing hash map from a pair of ids to (rank, merged id). Built once, read-only after.
class PairTable {
 public:
  struct Entry {
    uint64_t key;
    int32_t rank;
    TokenId merged;
  };
  void reserve(size_t n);
  // Inserts unless present; keeps the lower rank when the pair is already there.
  void insert(TokenId a, TokenId b, int32_t rank, TokenId merged);
  const Entry* find(TokenId a, TokenId b) const {
    const uint64_t key = make_key(a, b);
    size_t i = hash(key) & mask_;
    for (;;) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t make_key(TokenId a, TokenId b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  static size_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  void grow();
  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// Hash map from a byte string to an id (vocabulary lookups, tiktoken's whole-piece shortcut).
class BytesMap {
 public:
  void reserve(size_t n);
  // Inserts; `bytes` must outlive the map (it points into the Vocabulary's arena).
  void insert(std::string_view bytes, TokenId id);
  const TokenId* find(std::string_view bytes) const;

 private:
  struct Slot {
    std::string_view key;
    TokenId id = -1;
  };
  static size_t hash(std::string_view s);
  void grow();
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

class BpeModel {
 public:
  // Token bytes indexed by id; an empty entry with defined[id] false is a hole.
  void set_token(TokenId id, std::string bytes);
  // Finishes loading: builds the byte -> id table and the bytes -> id map. Throws kCorruptData
  // when a single byte has no token (`what` names the file).
  void finish(std::string_view what);

  PairTable& pairs() { return pairs_; }
  const std::string_view* bytes_of(TokenId id) const {
    if (id < 0 || static_cast<size_t>(id) >= views_.size() || !defined_[id]) return nullptr;
    return &views_[id];
  }
  const TokenId* id_of(std::string_view bytes) const { return by_bytes_.find(bytes); }
  int32_t size() const { return static_cast<int32_t>(views_.size()); }

  // Appends the BPE ids of one pre-tokenized piece. `work` is caller-owned scratch.
  struct Work {
    std::vector<TokenId> ids;
    std::vector<int32_t> ranks;
    std::vector<TokenId> merged;
    std::vector<int32_t> next, prev;
    std::vector<uint64_t> heap;
  };
  void encode_piece(std::string_view piece, std::vector<TokenId>& out, Work& work) const;

 private:
  void encode_long(std::string_view piece, std::vector<TokenId>& out, Work& work) const;

  std::vector<std::string> storage_;  // owned bytes of each id
  std::vector<std::string_view> views_;
  std::vector<bool> defined_;
  std::array<TokenId, 256> byte_ids_{};
  PairTable pairs_;
  BytesMap by_bytes_;
};

}  // namespace hymoe::tokenizer
