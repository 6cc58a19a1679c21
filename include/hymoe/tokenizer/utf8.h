// UTF-8 helpers shared by the tokenizer, the detokenizer and the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hymoe::tokenizer::utf8 {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool is_valid(std::string_view s);

// `s` with every ill-formed subsequence replaced by U+FFFD, following the WHATWG / Unicode
// "maximal subpart" practice (what TextDecoder and Python's errors="replace" produce).
std::string sanitize(std::string_view s);

// Length of the longest prefix of `s` that can be emitted now: it ends at a character boundary
// and what follows is at most one incomplete (but so far valid) character. Bytes that can never
// become valid are included so that sanitize() turns them into U+FFFD.
size_t complete_prefix(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (<= U+10FFFF, not a surrogate).
void append(std::string& out, uint32_t cp);

}  // namespace hymoe::tokenizer::utf8
