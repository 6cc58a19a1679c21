// A small synthetic tiktoken vocabulary written to a temp dir: all 256 bytes plus random byte
// substrings of random multilingual text, so tokens often cut UTF-8 characters in half.
#pragma once

#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::tokenizer::testing {

// Random valid UTF-8 text: ASCII words, CJK, emoji, combining marks, whitespace.
std::string random_text(std::mt19937& rng, size_t chars);

// Writes tiktoken.model + tokenizer_config.json (specials <|a|>, <|eos|>) into `dir`, loads it.
std::unique_ptr<Tokenizer> make_random_tiktoken(const std::filesystem::path& dir, std::mt19937& rng);

}  // namespace hymoe::tokenizer::testing
