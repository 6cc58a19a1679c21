// JSON mode (OpenAI response_format {"type":"json_object"}, issue 45): which bytes, and so which
// tokens, may come next if the output is to stay a JSON object text. A sampler masks every token
// the mask refuses, so the generated text is always a prefix of valid JSON, and allows
// end-of-sequence only once the object is whole.
//
// JsonPrefixMachine  an incremental byte-level pushdown automaton over RFC 8259 whose top-level
//                    value must be an object. It accepts exactly the prefixes of valid JSON object
//                    texts (within its two bounds below), so every state it reaches can still be
//                    completed: a sampler following it never gets stuck.
// JsonTokenMask      the vocabulary sorted once; per step, the tokens whose bytes can all be fed.
//
// Bounds, so that a model cannot loop forever on structure alone:
//   max_depth       containers open at once (the top-level object counts as 1); past it '[' and
//                   '{' are refused, scalars still allowed.
//   max_whitespace  consecutive whitespace bytes between tokens (and before or after the object);
//                   past it only a non-whitespace byte continues.
// Strings and numbers have no length bound: max_tokens ends those.
//
// Wired to decoding by json_constraint.h (a TokenConstraint the scheduler applies per step).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hymoe/server/json_lexer.h"

namespace hymoe::server {

struct JsonGrammarOptions {
  int32_t max_depth = 32;      // containers open at once, top-level object included; 1..64
  int32_t max_whitespace = 4;  // consecutive whitespace bytes outside strings; 0..255
};

// A small copyable value (24 bytes, no heap): the sampler copies one per candidate token.
class JsonPrefixMachine {
 public:
  static constexpr int32_t kMaxDepthLimit = 64;  // the open containers are bits of one uint64_t

  // Throws Error(kInvalidArgument) for options out of range.
  explicit JsonPrefixMachine(JsonGrammarOptions options = {});

  // Advances by one byte; false (state unchanged) when no valid JSON object text continues so.
  bool feed(char byte);
  // Advances by all bytes or none: false (state unchanged) when any byte is refused.
  bool feed(std::string_view bytes);

  // A whole object has been read (only whitespace may follow).
  bool complete() const { return mode_ == Mode::kDone; }
  // Containers open now.
  int32_t depth() const { return depth_; }

  bool operator==(const JsonPrefixMachine&) const = default;

 private:
  enum class Mode : uint8_t {
    kStart,         // before the top-level object: whitespace or '{'
    kObjectFirst,   // after '{': a key or '}'
    kObjectKey,     // after ',' in an object: a key
    kColon,         // after a key: ':'
    kValue,         // after ':' or ',' in an array: a value
    kArrayFirst,    // after '[': a value or ']'
    kAfterValue,    // after a value in a container: ',' or the container's closing bracket
    kDone,          // the top-level object closed: whitespace only
    kScalar,        // inside a string (in_key_: a key) or a number: lex_ reads it
    kLiteral,       // inside true / false / null: literal lit_, lit_pos_ bytes matched
  };

  // One byte on *this; false leaves *this partly changed (feed() steps a copy).
  bool step(uint8_t c);
  bool begin_value(uint8_t c);
  bool push(bool object);

  uint64_t objects_ = 0;  // bit i: container i (0 = outermost) is an object, else an array
  JsonScalarLexer lex_;
  Mode mode_ = Mode::kStart;
  uint8_t lit_ = 0, lit_pos_ = 0;
  uint8_t depth_ = 0;
  uint8_t max_depth_ = 32;
  uint8_t ws_run_ = 0;    // consecutive whitespace bytes just read outside strings
  uint8_t max_ws_ = 4;
  bool in_key_ = false;   // the string being read is an object key
};

// The vocabulary as byte strings, sorted once so that one pass per step shares the work of
// common prefixes: tokens are grouped by first byte (a refused first byte skips its whole group)
// and each token resumes from the state after its common prefix with the previous one.
// Thread-safe after construction (allowed() is const and keeps its scratch on the stack).
class JsonTokenMask {
 public:
  // vocab[id]: the bytes of token id. Empty tokens and special_ids are never allowed.
  // Throws Error(kInvalidArgument) for a special id outside the vocabulary.
  explicit JsonTokenMask(const std::vector<std::string>& vocab,
                         const std::vector<int32_t>& special_ids = {});

  // out resized to the vocabulary; out[id] = 1 where every byte of token id can be fed from m,
  // else 0. No allocation once out has the vocabulary's size. Machine: JsonPrefixMachine or
  // JsonSchemaMachine (json_schema.h): a copyable value with bool feed(char).
  template <class Machine>
  void allowed(const Machine& m, std::vector<uint8_t>& out) const;
  // End-of-sequence may be sampled: the object is whole.
  template <class Machine>
  bool end_allowed(const Machine& m) const { return m.complete(); }

  size_t vocab_size() const { return vocab_size_; }
  // The bytes of token id as given to the constructor; empty for special, empty or out-of-range
  // ids (those never allowed).
  std::string_view token_bytes(int32_t id) const;

 private:
  size_t vocab_size_ = 0;
  std::string bytes_;              // the allowed-able tokens' bytes, concatenated in sorted order
  std::vector<uint32_t> begin_;    // [n + 1]: token i is bytes_[begin_[i], begin_[i + 1])
  std::vector<int32_t> id_;        // [n]: token i's id
  std::vector<uint32_t> lcp_;      // [n]: bytes token i shares with token i - 1 (0 for a group's first)
  std::array<uint32_t, 257> group_{};  // tokens starting with byte b: [group_[b], group_[b + 1])
  std::vector<uint32_t> pos_;      // [vocab_size]: id's index in sorted order, or UINT32_MAX
};

template <class Machine>
void JsonTokenMask::allowed(const Machine& m, std::vector<uint8_t>& out) const {
  out.assign(vocab_size_, 0);
  // state[k]: the machine after the first k bytes of the current token (k <= kKeep); a longer
  // shared prefix is fed again from state[kKeep].
  constexpr size_t kKeep = 64;
  auto state = [&m]<size_t... I>(std::index_sequence<I...>) {  // Machine need not be default-constructible
    return std::array<Machine, sizeof...(I)>{((void)I, m)...};
  }(std::make_index_sequence<kKeep + 1>{});
  const char* bytes = bytes_.data();
  for (size_t b = 0; b < 256; ++b) {
    if (group_[b] == group_[b + 1]) continue;
    state[0] = m;
    state[1] = m;
    if (!state[1].feed(static_cast<char>(b))) continue;
    size_t prev_ok = 1;  // bytes of the previous token that could be fed
    for (uint32_t i = group_[b]; i < group_[b + 1]; ++i) {
      const size_t len = begin_[i + 1] - begin_[i];
      const char* tok = bytes + begin_[i];
      const size_t shared = lcp_[i];
      if (prev_ok < shared) continue;  // refused inside the prefix it shares with the previous one
      size_t k = std::min(shared, kKeep);
      Machine cur = state[k];
      while (k < shared) cur.feed(tok[k++]);  // past kKeep: known to succeed
      while (k < len && cur.feed(tok[k])) {
        ++k;
        if (k <= kKeep) state[k] = cur;
      }
      prev_ok = k;
      if (k == len) out[static_cast<size_t>(id_[i])] = 1;
    }
  }
}

}  // namespace hymoe::server
