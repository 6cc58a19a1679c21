// The format-specific loaders behind Tokenizer::load(dir), for callers that know the format or
// need to spell out what a model directory leaves implicit (tests, tools).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::tokenizer {

// Hugging Face tokenizer.json (BPE model; Sequence/Split/ByteLevel pre-tokenizers; ByteLevel
// decoder). `config` is tokenizer_config.json or empty: bos_token, eos_token, add_bos_token,
// add_eos_token come from it.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::filesystem::path& tokenizer_json,
                                             const std::filesystem::path& config = {});

// Kimi-K2's split pattern (tokenization_kimi.py), written for PCRE2: the Python `regex` class
// intersection [X&&[^\p{Han}]] becomes (?:(?!\p{Han})[X]).
extern const std::string_view kKimiK2Pattern;

// A tiktoken vocabulary: the ranks file holds "base64(bytes) rank" per line.
struct TiktokenSpec {
  std::filesystem::path ranks_file;
  std::string pattern;                                        // PCRE2 syntax
  std::vector<std::pair<std::string, TokenId>> special_tokens;  // text, id
  std::string bos_token, eos_token;                           // texts; "" for none
  bool add_bos = false, add_eos = false;
};
std::unique_ptr<Tokenizer> load_tiktoken(const TiktokenSpec& spec);

// A Kimi-K2 style directory: tiktoken.model + tokenizer_config.json (added_tokens_decoder,
// bos/eos). The ids [num_base, num_base + 256) that the config does not name become
// "<|reserved_token_{id}|>", as tokenization_kimi.py does. The pattern is kKimiK2Pattern unless
// tokenizer_config.json has a "pat_str" (a PCRE2 pattern; a hymoe extension for other models).
std::unique_ptr<Tokenizer> load_tiktoken_dir(const std::filesystem::path& dir);

}  // namespace hymoe::tokenizer
