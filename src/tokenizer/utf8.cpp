// UTF-8 validation and WHATWG-style replacement decoding.
#include "hymoe/tokenizer/utf8.h"

namespace hymoe::tokenizer::utf8 {
namespace {

// One step of the WHATWG UTF-8 decoder over bytes. feed() returns what the byte did.
class Decoder {
 public:
  enum class Step { kNeedMore, kCodePoint, kError, kErrorReprocess };

  Step feed(uint8_t b) {
    if (needed_ == 0) {
      if (b <= 0x7F) {
        cp_ = b;
        return Step::kCodePoint;
      }
      if (b >= 0xC2 && b <= 0xDF) {
        needed_ = 1;
        cp_ = b & 0x1F;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower_ = 0xA0;
        if (b == 0xED) upper_ = 0x9F;
        needed_ = 2;
        cp_ = b & 0x0F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower_ = 0x90;
        if (b == 0xF4) upper_ = 0x8F;
        needed_ = 3;
        cp_ = b & 0x07;
      } else {
        return Step::kError;
      }
      return Step::kNeedMore;
    }
    if (b < lower_ || b > upper_) {
      reset();
      return Step::kErrorReprocess;  // the byte starts afresh after one U+FFFD
    }
    lower_ = 0x80;
    upper_ = 0xBF;
    cp_ = (cp_ << 6) | (b & 0x3F);
    if (++seen_ < needed_) return Step::kNeedMore;
    reset();
    return Step::kCodePoint;
  }
  bool mid_character() const { return needed_ != 0; }
  uint32_t code_point() const { return cp_; }

 private:
  void reset() {
    needed_ = seen_ = 0;
    lower_ = 0x80;
    upper_ = 0xBF;
  }
  uint32_t cp_ = 0;
  int needed_ = 0, seen_ = 0;
  uint8_t lower_ = 0x80, upper_ = 0xBF;
};

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view s) {
  Decoder d;
  for (char c : s) {
    Decoder::Step st = d.feed(static_cast<uint8_t>(c));
    if (st == Decoder::Step::kError || st == Decoder::Step::kErrorReprocess) return false;
  }
  return !d.mid_character();
}

std::string sanitize(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  Decoder d;
  size_t char_start = 0;  // where the character being decoded began
  for (size_t i = 0; i < s.size(); ++i) {
    if (!d.mid_character()) char_start = i;
    switch (d.feed(static_cast<uint8_t>(s[i]))) {
      case Decoder::Step::kNeedMore:
        break;
      case Decoder::Step::kCodePoint:
        out.append(s.substr(char_start, i + 1 - char_start));
        break;
      case Decoder::Step::kError:
        out.append(kReplacement);
        break;
      case Decoder::Step::kErrorReprocess:
        out.append(kReplacement);
        --i;  // feed this byte again as the start of a new character
        break;
    }
  }
  if (d.mid_character()) out.append(kReplacement);
  return out;
}

size_t complete_prefix(std::string_view s) {
  Decoder d;
  size_t boundary = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    Decoder::Step st = d.feed(static_cast<uint8_t>(s[i]));
    if (st == Decoder::Step::kErrorReprocess) {
      boundary = i;  // the broken prefix is final; this byte starts again
      --i;
      continue;
    }
    if (!d.mid_character()) boundary = i + 1;
  }
  return boundary;
}

}  // namespace hymoe::tokenizer::utf8
