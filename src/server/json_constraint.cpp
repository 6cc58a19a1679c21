#include "hymoe/server/json_constraint.h"

#include <algorithm>
#include <concepts>
#include <limits>
#include <string_view>

#include "hymoe/common/error.h"

namespace hymoe::server {
namespace {

constexpr std::string_view kThinkClose = "</think>";
constexpr float kRefused = -std::numeric_limits<float>::infinity();

// Matches "</think>" across tokens. Its only '<' is its first byte, so after a mismatch the match
// restarts at that byte alone.
struct CloseMatcher {
  uint8_t matched = 0;
  // Feeds bytes; the offset just past the first completed "</think>", or npos.
  size_t feed(std::string_view bytes) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      const char c = bytes[i];
      matched = c == kThinkClose[matched] ? static_cast<uint8_t>(matched + 1) : (c == '<' ? 1 : 0);
      if (matched == kThinkClose.size()) return i + 1;
    }
    return std::string_view::npos;
  }
};

// A machine with whole-token symbols besides bytes (JsonSequenceMachine): its tokens are allowed
// beside the tokens whose bytes it takes, and it may go on after a point where it could end.
template <class Machine>
concept TokenSymbols = requires(Machine m, const Machine& c, int32_t id) {
  { m.feed_token(id) } -> std::same_as<bool>;
  c.tokens([](int32_t) {});
};

// Machine: JsonPrefixMachine (json_object), JsonSchemaMachine (json_schema) or JsonSequenceMachine
// (a grammar such as a forced tool call); `fresh` is its start state, copied where the answer
// begins.
template <class Machine>
class JsonConstraint final : public TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonModeVocab> vocab, std::shared_ptr<const void> keep, const Machine& fresh,
                 bool in_reasoning)
      : vocab_(std::move(vocab)), keep_(std::move(keep)), fresh_(fresh), machine_(fresh), masked_for_(fresh),
        in_reasoning_(in_reasoning) {}

  void mask(std::span<float> logits) override {
    const JsonModeVocab& v = *vocab_;
    const size_t n = logits.size();
    const size_t eos = static_cast<size_t>(v.eos);
    if (in_reasoning_) {
      // Free text, but no end before the answer and no close of the thought that the answer's
      // grammar would refuse.
      if (eos < n) logits[eos] = kRefused;
      for (const int32_t id : v.close_ids) {
        if (static_cast<size_t>(id) < n && !close_allowed(id)) logits[static_cast<size_t>(id)] = kRefused;
      }
      return;
    }
    const bool end_ok = machine_.complete();
    const float end = eos < n ? logits[eos] : kRefused;
    if (end_ok && !TokenSymbols<Machine>) {
      std::fill(logits.begin(), logits.end(), kRefused);
      if (eos < n) logits[eos] = end;
      return;
    }
    // The allowed set is a function of the machine's state alone, and a string's bytes mostly
    // leave it as it was: recomputed only when the state changed since the last step.
    if (allowed_.empty() || !(machine_ == masked_for_)) {
      v.mask.allowed(machine_, allowed_);
      if constexpr (TokenSymbols<Machine>) {
        machine_.tokens([&](int32_t id) {
          if (static_cast<size_t>(id) < allowed_.size()) allowed_[static_cast<size_t>(id)] = 1;
        });
      }
      masked_for_ = machine_;
    }
    const size_t m = std::min(n, allowed_.size());
    for (size_t i = 0; i < m; ++i) {
      if (!allowed_[i]) logits[i] = kRefused;
    }
    std::fill(logits.begin() + static_cast<ptrdiff_t>(m), logits.end(), kRefused);
    if (eos < n) logits[eos] = end_ok ? end : kRefused;  // the end only once the text is whole
  }

  bool accept(int32_t token) override {
    const JsonModeVocab& v = *vocab_;
    if (token == v.eos) return !in_reasoning_ && machine_.complete();
    const std::string_view bytes = v.mask.token_bytes(token);
    if (in_reasoning_) {
      // Special tokens are not text (the detokenizer skips them): they leave the match as it is.
      CloseMatcher close = close_;
      const size_t end = close.feed(bytes);
      if (end != std::string_view::npos) {
        Machine answer = fresh_;
        if (!answer.feed(bytes.substr(end))) return false;
        machine_ = answer;
        in_reasoning_ = false;
      }
      close_ = close;
      return true;
    }
    if constexpr (TokenSymbols<Machine>) {
      if (machine_.feed_token(token)) return true;
    } else if (machine_.complete()) {
      return false;
    }
    if (bytes.empty()) return false;
    return machine_.feed(bytes);
  }

 private:
  // A token that holds '>' may close the thought: then what follows the close in the token must
  // start the answer.
  bool close_allowed(int32_t id) const {
    const std::string_view bytes = vocab_->mask.token_bytes(id);
    CloseMatcher close = close_;
    const size_t end = close.feed(bytes);
    if (end == std::string_view::npos) return true;
    Machine answer = fresh_;
    return answer.feed(bytes.substr(end));
  }

  std::shared_ptr<const JsonModeVocab> vocab_;
  std::shared_ptr<const void> keep_;  // what the machine points into (a schema or grammar; else null)
  Machine fresh_;
  Machine machine_;
  Machine masked_for_;  // the state allowed_ was computed for (when not empty)
  CloseMatcher close_;
  bool in_reasoning_;
  std::vector<uint8_t> allowed_;  // JsonTokenMask::allowed's output, kept between steps
};

}  // namespace

JsonModeVocab::JsonModeVocab(const std::vector<std::string>& vocab, std::vector<int32_t> special_ids, int32_t eos_id,
                             JsonGrammarOptions grammar)
    : mask(vocab, [&] {
        HYMOE_CHECK(eos_id >= 0 && static_cast<size_t>(eos_id) < vocab.size(), kInvalidArgument,
                    "json mode: end-of-sequence id {} outside the vocabulary of {}", eos_id, vocab.size());
        special_ids.push_back(eos_id);
        std::sort(special_ids.begin(), special_ids.end());
        special_ids.erase(std::unique(special_ids.begin(), special_ids.end()), special_ids.end());
        return special_ids;
      }()),
      eos(eos_id),
      options(grammar) {
  JsonPrefixMachine check(options);  // throws for options out of range
  (void)check;
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (mask.token_bytes(static_cast<int32_t>(id)).find('>') != std::string_view::npos) {
      close_ids.push_back(static_cast<int32_t>(id));
    }
  }
}

std::unique_ptr<TokenConstraint> JsonConstraintFactory::start() const {
  if (schema_) {
    return std::make_unique<JsonConstraint<JsonSchemaMachine>>(vocab_, schema_, JsonSchemaMachine(*schema_, vocab_->options),
                                                               in_reasoning_);
  }
  return std::make_unique<JsonConstraint<JsonPrefixMachine>>(vocab_, nullptr, JsonPrefixMachine(vocab_->options),
                                                             in_reasoning_);
}

std::unique_ptr<TokenConstraint> JsonSequenceConstraintFactory::start() const {
  return std::make_unique<JsonConstraint<JsonSequenceMachine>>(vocab_, grammar_, JsonSequenceMachine(*grammar_),
                                                               in_reasoning_);
}

}  // namespace hymoe::server
