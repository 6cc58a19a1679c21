#include "byte_level.h"

#include <array>
#include <cstdint>

#include "hymoe/tokenizer/utf8.h"

namespace hymoe::tokenizer::byte_level {
namespace {

struct Tables {
  std::array<uint16_t, 256> to_cp{};     // byte -> code point
  std::array<int16_t, 512> to_byte{};    // code point (< 512) -> byte, -1 when none
};

constexpr bool is_self(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr Tables make_tables() {
  Tables t{};
  for (auto& v : t.to_byte) v = -1;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const int cp = is_self(b) ? b : 256 + extra++;
    t.to_cp[b] = static_cast<uint16_t>(cp);
    t.to_byte[cp] = static_cast<int16_t>(b);
  }
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, kTables.to_cp[uint8_t(c)]);
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const uint8_t b0 = uint8_t(text[i]);
    uint32_t cp = 0;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((b0 & 0x1Fu) << 6) | (uint8_t(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // every code point of the alphabet is below U+0800
    }
    if (cp >= 512 || kTables.to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(kTables.to_byte[cp]));
  }
  return out;
}

}  // namespace hymoe::tokenizer::byte_level
