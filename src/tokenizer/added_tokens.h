// Added/special tokens written literally in text: found before pre-tokenization, leftmost-longest
// (what Hugging Face's AddedVocabulary does with its Aho-Corasick automaton).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::tokenizer {

// Hash for heterogeneous (string_view) lookups in string-keyed maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class AddedTokens {
 public:
  void add(std::string text, TokenId id, bool special);

  struct Match {
    size_t begin = 0, end = 0;
    TokenId id = -1;
  };
  // The leftmost-longest token occurring in text[from..]; false when none.
  bool find(std::string_view text, size_t from, Match& m) const;

  const std::string* text_of(TokenId id) const;
  const TokenId* id_of(std::string_view text) const;
  bool is_special(TokenId id) const;
  bool empty() const { return by_text_.empty(); }
  TokenId max_id() const { return max_id_; }

 private:
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> by_text_;
  std::unordered_map<TokenId, std::string> by_id_;
  std::unordered_map<TokenId, bool> special_;
  // Per first byte: the distinct token lengths starting with it, longest first.
  std::array<std::vector<size_t>, 256> lengths_;
  TokenId max_id_ = -1;
};

}  // namespace hymoe::tokenizer
