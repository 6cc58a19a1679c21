// JSON mode (response_format {"type":"json_object"}) and structured outputs ({"type":"json_schema"})
// as a TokenConstraint for the scheduler: the generated text is always a prefix of a JSON object
// text (json_grammar.h) or of a text conforming to the schema (json_schema.h), and it may end only
// once the object is whole.
//
// JsonModeVocab          one per served model, built at load: the token mask over the tokenizer's
//                        vocabulary, the end-of-sequence id, the tokens that can close a thought.
// JsonConstraintFactory  one per request (with the request's compiled schema, if any); starts
//                        each sequence's constraint.
//
// Per step the constraint sets -inf on every token whose bytes the grammar refuses (one pass of
// JsonTokenMask over the vocabulary into a buffer the sequence keeps), and on end-of-sequence until
// the object closes. Once it closes, end-of-sequence is the only token left: no trailing
// whitespace, so the request ends at once.
//
// Reasoning: when the output starts inside a thought (DeepSeek-R1's "<think>"), the thought is
// free text and the constraint applies to the content after "</think>" only (what the reasoning
// splitter returns as `content`). While in the thought, end-of-sequence is refused, and so is a
// token that would close the thought and carry on with bytes the grammar refuses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hymoe/engine/token_constraint.h"
#include "hymoe/server/json_grammar.h"
#include "hymoe/server/json_schema.h"
#include "hymoe/server/json_sequence.h"

namespace hymoe::server {

struct JsonModeVocab {
  // vocab[id]: token id's bytes; special_ids never generated in JSON (eos is added to them).
  // Throws Error(kInvalidArgument) for an eos outside the vocabulary.
  JsonModeVocab(const std::vector<std::string>& vocab, std::vector<int32_t> special_ids, int32_t eos,
                JsonGrammarOptions options = {});

  JsonTokenMask mask;
  int32_t eos;
  JsonGrammarOptions options;
  std::vector<int32_t> close_ids;  // tokens whose bytes hold '>', the only ones that can end "</think>"
};

class JsonConstraintFactory final : public TokenConstraintFactory {
 public:
  // in_reasoning: the output starts inside a thought; JSON begins after "</think>".
  // schema: the output must conform to it (null: any JSON object).
  JsonConstraintFactory(std::shared_ptr<const JsonModeVocab> vocab, bool in_reasoning,
                        std::shared_ptr<const JsonSchema> schema = nullptr)
      : vocab_(std::move(vocab)), schema_(std::move(schema)), in_reasoning_(in_reasoning) {}

  std::unique_ptr<TokenConstraint> start() const override;

 private:
  std::shared_ptr<const JsonModeVocab> vocab_;
  std::shared_ptr<const JsonSchema> schema_;
  bool in_reasoning_;
};

// A JsonSequenceGrammar's output (a forced tool call: tool_calls.h) as a constraint: bytes as in
// JSON mode, plus the grammar's whole-token symbols (a model's markers, special or not), and
// end-of-sequence only where the grammar may end. The reasoning rule is JSON mode's.
class JsonSequenceConstraintFactory final : public TokenConstraintFactory {
 public:
  JsonSequenceConstraintFactory(std::shared_ptr<const JsonModeVocab> vocab, bool in_reasoning,
                                std::shared_ptr<const JsonSequenceGrammar> grammar)
      : vocab_(std::move(vocab)), grammar_(std::move(grammar)), in_reasoning_(in_reasoning) {}

  std::unique_ptr<TokenConstraint> start() const override;

 private:
  std::shared_ptr<const JsonModeVocab> vocab_;
  std::shared_ptr<const JsonSequenceGrammar> grammar_;
  bool in_reasoning_;
};

}  // namespace hymoe::server
