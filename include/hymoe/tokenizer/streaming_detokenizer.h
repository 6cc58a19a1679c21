// Incremental detokenization for streamed responses.
//
// Text leaves only in whole UTF-8 characters, also when one character spans several tokens; and
// never past the start of a stop string, also when the stop string straddles tokens: text that
// could still turn into a stop string is held back until it cannot (or until finish()).
//
// Not thread-safe: one instance per sequence. The Tokenizer must outlive it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::tokenizer {

class StreamingDetokenizer {
 public:
  struct Options {
    bool skip_special = true;        // drop special tokens (e.g. the EOS) from the text
    std::vector<std::string> stop;   // stop strings; empty ones are ignored
    // Special tokens whose text stays with skip_special on (Kimi-K2's tool-call markers, which
    // the tool-call parser reads).
    std::vector<TokenId> keep_special;
  };

  StreamingDetokenizer(const Tokenizer& tokenizer, Options options);
  StreamingDetokenizer(const StreamingDetokenizer&) = delete;
  StreamingDetokenizer& operator=(const StreamingDetokenizer&) = delete;
  StreamingDetokenizer(StreamingDetokenizer&&) = default;

  // Feeds one generated id; returns the text that is now final (often empty). Once a stop string
  // is found the text before it is returned, stopped() turns true and later calls return "".
  // Throws kInvalidArgument for an id outside the vocabulary.
  std::string push(TokenId id);

  // End of the stream: returns the held-back text; a trailing incomplete character becomes
  // U+FFFD. Idempotent.
  std::string finish();

  bool stopped() const { return stop_index_.has_value(); }
  // Which of Options::stop matched (index into it).
  std::optional<size_t> stop_index() const { return stop_index_; }

 private:
  std::string release(std::string chunk, bool final);

  const Tokenizer& tokenizer_;
  Options options_;
  std::string bytes_;    // undecoded tail: at most one incomplete character
  std::string pending_;  // decoded text held back because it may begin a stop string
  std::optional<size_t> stop_index_;
};

}  // namespace hymoe::tokenizer
