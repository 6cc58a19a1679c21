// Prompts of an exact token length.
//
// Prompts are sequences of common English words, each with a leading space, chosen by a seeded
// generator. With a token counter (the server's /tokenize), the builder keeps only words that
// are one token on their own and then checks every prompt, adding or dropping words at its tail
// until the count is exact (bounded retries). Without one, it assumes one token per word and
// says so (mode() == "estimate").
//
// Shared prefixes (Mooncake hash_ids): a prompt is the concatenation of blocks of block_size
// tokens, block k generated from hash_ids[k] alone, so requests with equal leading ids share a
// byte-identical prefix; the last block holds the remainder of input_len.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "trace.h"

namespace hymoe::bench {

// Counts the tokens of a text (without special tokens); nullopt when it cannot.
using TokenCounter = std::function<std::optional<int>(const std::string&)>;

class PromptBuilder {
 public:
  // counter may be empty (estimate mode). Calibrates the word list against the counter; when the
  // counter answers nothing for a probe, falls back to estimate mode.
  PromptBuilder(TokenCounter counter, std::uint64_t seed, int block_size);

  // "tokenize" when prompts are checked against the counter, else "estimate".
  const std::string& mode() const { return mode_; }

  // The prompt for request `index` of a workload. A literal prompt is returned as is.
  // Sets *exact to whether the token count was verified equal to input_len.
  std::string build(const RequestSpec& spec, std::size_t index, bool* exact = nullptr) const;

  // Number of usable single-token words.
  std::size_t vocabulary_size() const { return words_.size(); }

 private:
  std::string random_words(std::uint64_t stream, int count) const;

  TokenCounter counter_;
  std::uint64_t seed_;
  int block_size_;
  std::vector<std::string> words_;  // each " word", one token (when calibrated)
  std::string mode_ = "estimate";
};

}  // namespace hymoe::bench
