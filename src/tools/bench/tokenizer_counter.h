// Token counting from the model's tokenizer files (tokenizer.json or tiktoken.model), the
// fallback for servers without /tokenize. Built when the hymoe_tokenizer library is
// (HYMOE_BENCH_HAVE_TOKENIZER).
#pragma once

#include <string>

#include "prompts.h"

namespace hymoe::bench {

// True when this build can read tokenizer files.
bool have_tokenizer_files_support();

// Loads the tokenizer of a model directory and returns a counter (no special tokens).
// Throws hymoe::Error: kNotFound / kCorruptData from the loader, kUnsupported when this build
// has no tokenizer library.
TokenCounter load_tokenizer_counter(const std::string& dir);

}  // namespace hymoe::bench
