#include "bpe_tokenizer.h"

#include <algorithm>
#include <utility>

#include "byte_level.h"
#include "hymoe/common/error.h"
#include "hymoe/tokenizer/utf8.h"

namespace hymoe::tokenizer {

struct BpeTokenizer::Scratch {
  MatchScratch match;
  BpeModel::Work work;
  std::vector<std::pair<size_t, size_t>> spans, next_spans;  // (begin, end) in the segment
};

BpeTokenizer::BpeTokenizer(BpeTokenizerSpec spec)
    : spec_(std::move(spec)), cache_(std::make_unique<std::array<CacheShard, kCacheShards>>()) {
  vocab_size_ = std::max(spec_.model.size(), spec_.added.max_id() + 1);
  auto resolve = [&](const std::string& text) -> std::optional<TokenId> {
    if (text.empty()) return std::nullopt;
    if (const TokenId* id = spec_.added.id_of(text)) return *id;
    if (const TokenId* id = spec_.model.id_of(text)) return *id;
    HYMOE_THROW(kCorruptData, "{} tokenizer: special token {} is not in the vocabulary",
                spec_.format, text);
  };
  bos_id_ = resolve(spec_.bos_token);
  eos_id_ = resolve(spec_.eos_token);
  if (spec_.add_bos) HYMOE_CHECK(bos_id_, kCorruptData, "add_bos_token is set but there is no bos_token");
  if (spec_.add_eos) HYMOE_CHECK(eos_id_, kCorruptData, "add_eos_token is set but there is no eos_token");
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text, bool add_special) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::sanitize(text);
    text = repaired;
  }
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && spec_.add_bos) out.push_back(*bos_id_);
  Scratch s;
  size_t pos = 0;
  AddedTokens::Match m;
  while (spec_.added.find(text, pos, m)) {
    encode_segment(text.substr(pos, m.begin - pos), out, s);
    out.push_back(m.id);
    pos = m.end;
  }
  encode_segment(text.substr(pos), out, s);
  if (add_special && spec_.add_eos) out.push_back(*eos_id_);
  return out;
}

void BpeTokenizer::encode_segment(std::string_view segment, std::vector<TokenId>& out,
                                  Scratch& s) const {
  if (segment.empty()) return;
  s.spans.assign(1, {0, segment.size()});
  for (const PreTokenizeStep& step : spec_.steps) {
    s.next_spans.clear();
    for (auto [b, e] : s.spans) {
      const std::string_view subject = segment.substr(b, e - b);
      size_t gap = 0, search = 0, mb = 0, me = 0;
      while (search < subject.size() && step.regex.find(subject, search, mb, me, s.match)) {
        if (me == mb) {  // an empty match splits nothing; search again one character on
          search = mb + 1;
          while (search < subject.size() && (uint8_t(subject[search]) & 0xC0) == 0x80) ++search;
          continue;
        }
        if (step.keep_gaps && mb > gap) s.next_spans.emplace_back(b + gap, b + mb);
        s.next_spans.emplace_back(b + mb, b + me);
        gap = search = me;
      }
      if (step.keep_gaps && gap < subject.size()) s.next_spans.emplace_back(b + gap, e);
    }
    std::swap(s.spans, s.next_spans);
  }
  for (auto [b, e] : s.spans) {
    const std::string_view piece = segment.substr(b, e - b);
    if (spec_.whole_piece_first) {
      if (const TokenId* id = spec_.model.id_of(piece)) {
        out.push_back(*id);
        continue;
      }
    }
    encode_piece_cached(piece, out, s);
  }
}

void BpeTokenizer::encode_piece_cached(std::string_view piece, std::vector<TokenId>& out,
                                       Scratch& s) const {
  if (piece.size() < 4 || piece.size() > kCacheMaxPiece) {
    spec_.model.encode_piece(piece, out, s.work);
    return;
  }
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the piece, then a final mix
  for (char c : piece) h = (h ^ uint8_t(c)) * 0x100000001b3ULL;
  h ^= h >> 32;
  CacheShard& shard = (*cache_)[h % kCacheShards];
  CacheSlot& slot = shard.slots[(h / kCacheShards) % kCacheShardSlots];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    if (slot.hash == h && slot.key_len == piece.size() &&
        std::memcmp(slot.key, piece.data(), piece.size()) == 0) {
      out.insert(out.end(), slot.ids, slot.ids + slot.n_ids);
      return;
    }
  }
  const size_t before = out.size();
  spec_.model.encode_piece(piece, out, s.work);
  const size_t n = out.size() - before;
  if (n > kCacheMaxIds) return;
  std::lock_guard<std::mutex> lock(shard.mu);
  slot.hash = h;
  slot.key_len = static_cast<uint8_t>(piece.size());
  slot.n_ids = static_cast<uint8_t>(n);
  std::memcpy(slot.key, piece.data(), piece.size());
  std::copy(out.begin() + long(before), out.end(), slot.ids);
}

std::string_view BpeTokenizer::token_bytes(TokenId id) const {
  if (const std::string* text = spec_.added.text_of(id)) return *text;
  if (const std::string_view* bytes = spec_.model.bytes_of(id)) return *bytes;
  HYMOE_THROW(kInvalidArgument, "token id {} is not in the vocabulary (size {})", id, vocab_size_);
}

std::string BpeTokenizer::piece(TokenId id) const {
  if (const std::string* text = spec_.added.text_of(id)) return *text;
  const std::string_view* bytes = spec_.model.bytes_of(id);
  HYMOE_CHECK(bytes, kInvalidArgument, "token id {} is not in the vocabulary (size {})", id,
              vocab_size_);
  if (static_cast<size_t>(id) < spec_.spellings.size() && !spec_.spellings[id].empty()) {
    return spec_.spellings[id];
  }
  return std::string(*bytes);
}

std::optional<TokenId> BpeTokenizer::piece_to_id(std::string_view piece) const {
  if (const TokenId* id = spec_.added.id_of(piece)) return *id;
  if (!spec_.spellings.empty()) {
    if (auto bytes = byte_level::decode(piece)) {
      if (const TokenId* id = spec_.model.id_of(*bytes)) return *id;
    }
  }
  if (const TokenId* id = spec_.model.id_of(piece)) return *id;
  return std::nullopt;
}

std::optional<TokenId> BpeTokenizer::special_token_id(std::string_view text) const {
  if (const TokenId* id = spec_.added.id_of(text)) return *id;
  return std::nullopt;
}

}  // namespace hymoe::tokenizer
