#include "added_tokens.h"

#include <algorithm>
#include <cstring>

namespace hymoe::tokenizer {

void AddedTokens::add(std::string text, TokenId id, bool special) {
  if (text.empty()) return;
  auto& lens = lengths_[uint8_t(text[0])];
  if (std::find(lens.begin(), lens.end(), text.size()) == lens.end()) {
    lens.push_back(text.size());
    std::sort(lens.rbegin(), lens.rend());
  }
  by_id_[id] = text;
  special_[id] = special;
  by_text_[std::move(text)] = id;
  max_id_ = std::max(max_id_, id);
}

bool AddedTokens::find(std::string_view text, size_t from, Match& m) const {
  if (by_text_.empty()) return false;
  for (size_t i = from; i < text.size(); ++i) {
    const auto& lens = lengths_[uint8_t(text[i])];
    if (lens.empty()) continue;
    for (size_t len : lens) {
      if (len > text.size() - i) continue;
      auto it = by_text_.find(text.substr(i, len));
      if (it != by_text_.end()) {
        m = Match{i, i + len, it->second};
        return true;
      }
    }
  }
  return false;
}

const std::string* AddedTokens::text_of(TokenId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

const TokenId* AddedTokens::id_of(std::string_view text) const {
  auto it = by_text_.find(text);
  return it == by_text_.end() ? nullptr : &it->second;
}

bool AddedTokens::is_special(TokenId id) const {
  auto it = special_.find(id);
  return it != special_.end() && it->second;
}

}  // namespace hymoe::tokenizer
