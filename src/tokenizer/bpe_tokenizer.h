// The one Tokenizer implementation behind both file formats: added tokens, then a list of regex
// pre-tokenization steps, then byte-pair merges on each piece. The loaders (hf_loader.cpp,
// tiktoken_loader.cpp) only translate their files into a BpeTokenizerSpec.
#pragma once

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "added_tokens.h"
#include "bpe.h"
#include "hymoe/tokenizer/tokenizer.h"
#include "pcre_regex.h"

namespace hymoe::tokenizer {

struct PreTokenizeStep {
  Regex regex;
  // true: Hugging Face Split "Isolated" (text between matches is kept as pieces too);
  // false: tiktoken's findall (only the matches are pieces).
  bool keep_gaps = true;
};

struct BpeTokenizerSpec {
  std::string format;  // "tokenizer.json" or "tiktoken"
  BpeModel model;
  AddedTokens added;
  std::vector<PreTokenizeStep> steps;  // applied in order, each to every piece of the previous
  bool whole_piece_first = false;      // a piece that is itself a token is not merged (tiktoken)
  // The vocabulary's own spelling of each id where it differs from the raw bytes (tokenizer.json
  // stores GPT-2 byte-level text); empty for tiktoken.
  std::vector<std::string> spellings;
  std::string bos_token, eos_token;
  bool add_bos = false, add_eos = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTokenizerSpec spec);

  std::vector<TokenId> encode(std::string_view text, bool add_special) const override;
  std::string_view token_bytes(TokenId id) const override;
  std::string piece(TokenId id) const override;
  std::optional<TokenId> piece_to_id(std::string_view piece) const override;
  std::optional<TokenId> special_token_id(std::string_view text) const override;
  bool is_special(TokenId id) const override { return spec_.added.is_special(id); }
  int32_t vocab_size() const override { return vocab_size_; }
  std::optional<TokenId> bos_id() const override { return bos_id_; }
  std::optional<TokenId> eos_id() const override { return eos_id_; }
  const std::string& bos_token() const override { return spec_.bos_token; }
  const std::string& eos_token() const override { return spec_.eos_token; }
  std::string_view format() const override { return spec_.format; }

 private:
  struct Scratch;
  void encode_segment(std::string_view segment, std::vector<TokenId>& out, Scratch& s) const;

  // Memo of piece -> ids (pieces repeat: words, indentation, numbers): a direct-mapped table
  // of fixed-size slots (no allocation), sharded by hash so that threads rarely share a lock.
  // A colliding piece simply replaces the slot's previous one.
  static constexpr size_t kCacheMaxPiece = 30;  // bytes
  static constexpr size_t kCacheMaxIds = 7;
  struct CacheSlot {
    uint64_t hash = 0;
    uint8_t key_len = 0;  // 0 = empty
    uint8_t n_ids = 0;
    char key[kCacheMaxPiece];
    TokenId ids[kCacheMaxIds];
  };
  static constexpr size_t kCacheShards = 64;
  static constexpr size_t kCacheShardSlots = 1024;
  struct CacheShard {
    std::mutex mu;
    std::array<CacheSlot, kCacheShardSlots> slots;
  };
  void encode_piece_cached(std::string_view piece, std::vector<TokenId>& out, Scratch& s) const;

  BpeTokenizerSpec spec_;
  mutable std::unique_ptr<std::array<CacheShard, kCacheShards>> cache_;
  int32_t vocab_size_ = 0;
  std::optional<TokenId> bos_id_, eos_id_;
};

}  // namespace hymoe::tokenizer
