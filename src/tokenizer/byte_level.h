// GPT-2's byte-level alphabet: every byte is spelled as one printable code point, so that
// vocabularies can be stored as text. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF are themselves;
// the other 68 bytes map in order to U+0100 and up.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hymoe::tokenizer::byte_level {

// The byte-level spelling (UTF-8) of raw bytes.
std::string encode(std::string_view bytes);

// Raw bytes of a byte-level spelling; nullopt when `text` has a code point outside the alphabet
// (e.g. added tokens stored in the vocabulary as plain text).
std::optional<std::string> decode(std::string_view text);

}  // namespace hymoe::tokenizer::byte_level
