#include "hymoe/server/json_grammar.h"

#include <algorithm>
#include <numeric>

#include "hymoe/common/error.h"

namespace hymoe::server {
namespace {

static_assert(sizeof(JsonPrefixMachine) <= 24, "the sampler copies one machine per candidate token");

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

bool is_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

constexpr JsonScalarLexer::NumberRules kAnyNumber{};  // JSON's numbers, no digit limits

}  // namespace

JsonPrefixMachine::JsonPrefixMachine(JsonGrammarOptions options) {
  HYMOE_CHECK(options.max_depth >= 1 && options.max_depth <= kMaxDepthLimit, kInvalidArgument,
              "json grammar: max_depth {} not in [1, {}]", options.max_depth, kMaxDepthLimit);
  HYMOE_CHECK(options.max_whitespace >= 0 && options.max_whitespace <= 255, kInvalidArgument,
              "json grammar: max_whitespace {} not in [0, 255]", options.max_whitespace);
  max_depth_ = static_cast<uint8_t>(options.max_depth);
  max_ws_ = static_cast<uint8_t>(options.max_whitespace);
}

bool JsonPrefixMachine::feed(char byte) {
  JsonPrefixMachine next = *this;
  if (!next.step(static_cast<uint8_t>(byte))) return false;
  *this = next;
  return true;
}

bool JsonPrefixMachine::feed(std::string_view bytes) {
  JsonPrefixMachine next = *this;
  for (char b : bytes) {
    if (!next.step(static_cast<uint8_t>(b))) return false;
  }
  *this = next;
  return true;
}

bool JsonPrefixMachine::push(bool object) {
  if (depth_ >= max_depth_) return false;
  const uint64_t bit = uint64_t{1} << depth_;
  objects_ = object ? (objects_ | bit) : (objects_ & ~bit);
  ++depth_;
  mode_ = object ? Mode::kObjectFirst : Mode::kArrayFirst;
  return true;
}

bool JsonPrefixMachine::begin_value(uint8_t c) {
  switch (c) {
    case '{': return push(true);
    case '[': return push(false);
    case '"': mode_ = Mode::kScalar; lex_.begin_string(); in_key_ = false; return true;
    case 't': case 'f': case 'n':
      mode_ = Mode::kLiteral;
      lit_ = c == 't' ? 0 : c == 'f' ? 1 : 2;
      lit_pos_ = 1;
      return true;
    default:
      if (!lex_.begin_number(c)) return false;
      mode_ = Mode::kScalar;
      return true;
  }
}

bool JsonPrefixMachine::step(uint8_t c) {
  // Structural modes: whitespace is counted here, once, for all of them.
  if (mode_ <= Mode::kDone) {
    if (is_space(c)) {
      if (ws_run_ >= max_ws_) return false;
      ++ws_run_;
      return true;
    }
  }
  ws_run_ = 0;
  switch (mode_) {
    case Mode::kStart:
      return c == '{' && push(true);
    case Mode::kObjectFirst:
    case Mode::kObjectKey:
      if (c == '"') { mode_ = Mode::kScalar; lex_.begin_string(); in_key_ = true; return true; }
      if (c == '}' && mode_ == Mode::kObjectFirst) break;  // close below
      return false;
    case Mode::kColon:
      if (c != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kArrayFirst:
      if (c == ']') break;
      return begin_value(c);
    case Mode::kValue:
      return begin_value(c);
    case Mode::kAfterValue:
      if (c == ',') {
        mode_ = ((objects_ >> (depth_ - 1)) & 1) ? Mode::kObjectKey : Mode::kValue;
        return true;
      }
      if (c == '}' || c == ']') break;
      return false;
    case Mode::kDone:
      return false;

    case Mode::kScalar:
      switch (lex_.step(c, kAnyNumber)) {
        case JsonScalarLexer::Result::kMore: return true;
        case JsonScalarLexer::Result::kEnd: mode_ = in_key_ ? Mode::kColon : Mode::kAfterValue; return true;
        // A number ends at the first byte that cannot extend it; that byte is then read after the
        // value (whitespace counted there).
        case JsonScalarLexer::Result::kEndBefore: mode_ = Mode::kAfterValue; return step(c);
        case JsonScalarLexer::Result::kRefused: return false;
      }
      return false;

    case Mode::kLiteral: {
      const std::string_view lit = kLiterals[lit_];
      if (c != static_cast<uint8_t>(lit[lit_pos_])) return false;
      if (++lit_pos_ == lit.size()) mode_ = Mode::kAfterValue;
      return true;
    }
  }
  // A closing bracket: it must match the innermost container.
  if (depth_ == 0 || (c == '}') != static_cast<bool>((objects_ >> (depth_ - 1)) & 1)) return false;
  --depth_;
  mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
  return true;
}

JsonTokenMask::JsonTokenMask(const std::vector<std::string>& vocab, const std::vector<int32_t>& special_ids)
    : vocab_size_(vocab.size()) {
  std::vector<uint8_t> special(vocab.size(), 0);
  for (int32_t id : special_ids) {
    HYMOE_CHECK(id >= 0 && static_cast<size_t>(id) < vocab.size(), kInvalidArgument,
                "json token mask: special id {} outside the vocabulary of {}", id, vocab.size());
    special[id] = 1;
  }
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (!special[id] && !vocab[id].empty()) id_.push_back(static_cast<int32_t>(id));
  }
  // std::string compares bytes as unsigned char, so the order groups tokens by first byte.
  std::sort(id_.begin(), id_.end(), [&vocab](int32_t a, int32_t b) { return vocab[a] < vocab[b]; });

  begin_.reserve(id_.size() + 1);
  lcp_.reserve(id_.size());
  std::string_view prev;
  for (int32_t id : id_) {
    const std::string& tok = vocab[id];
    begin_.push_back(static_cast<uint32_t>(bytes_.size()));
    bytes_ += tok;
    const size_t n = std::min(prev.size(), tok.size());
    size_t l = 0;
    while (l < n && prev[l] == tok[l]) ++l;
    lcp_.push_back(static_cast<uint32_t>(l));
    prev = tok;
  }
  begin_.push_back(static_cast<uint32_t>(bytes_.size()));
  pos_.assign(vocab.size(), UINT32_MAX);
  for (size_t i = 0; i < id_.size(); ++i) pos_[static_cast<size_t>(id_[i])] = static_cast<uint32_t>(i);

  std::array<uint32_t, 256> count{};
  for (int32_t id : id_) ++count[static_cast<uint8_t>(vocab[id][0])];
  group_[0] = 0;
  for (size_t b = 0; b < 256; ++b) group_[b + 1] = group_[b] + count[b];
  // A group's first token resumes after its first byte only.
  for (size_t b = 0; b < 256; ++b) {
    if (group_[b] < group_[b + 1]) lcp_[group_[b]] = 1;
  }
}

std::string_view JsonTokenMask::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_size_ || pos_[static_cast<size_t>(id)] == UINT32_MAX) return {};
  const uint32_t i = pos_[static_cast<size_t>(id)];
  return std::string_view(bytes_).substr(begin_[i], begin_[i + 1] - begin_[i]);
}

}  // namespace hymoe::server
