// JSON's scalar tokens byte by byte, shared by JsonPrefixMachine (json_grammar.h) and
// JsonSchemaMachine (json_schema.h): the inside of a string after its opening quote, and a number
// from its first byte, with the checks strict parsers make - UTF-8 without overlong forms,
// surrogates or code points past U+10FFFF, escapes, \u surrogates only in pairs, no leading zeros.
// A small value (8 bytes, no heap) inside the machines, which the token mask copies per byte.
#pragma once

#include <cstdint>

namespace hymoe::server {

class JsonScalarLexer {
 public:
  // Digits a number may hold: at most max_int_digits integer and max_exp_digits exponent digits
  // (0: any number of them).
  struct NumberRules {
    uint8_t max_int_digits = 0;
    uint8_t max_exp_digits = 0;
  };

  enum class Result : uint8_t {
    kMore,       // taken; the scalar goes on
    kEnd,        // taken; it ended with this byte (a string's closing quote)
    kEndBefore,  // not taken: a number ended before this byte, which belongs after the value
    kRefused,    // not taken: no scalar continues so (the state may be changed: callers step a copy)
  };

  // After a string's opening quote.
  void begin_string() { mode_ = Mode::kString; }
  // A number's first byte ('-' or a digit); false for any other byte. integer: no fraction or
  // exponent.
  bool begin_number(uint8_t c, bool integer = false) {
    integer_ = integer;
    sub_ = 1;  // integer digits read (kNumInt)
    if (c == '-') mode_ = Mode::kNumMinus;
    else if (c == '0') mode_ = Mode::kNumZero;
    else if (c >= '1' && c <= '9') mode_ = Mode::kNumInt;
    else return false;
    return true;
  }
  // Inside a string (else a number).
  bool in_string() const { return mode_ <= Mode::kUtf8; }

  Result step(uint8_t c, NumberRules rules);

  bool operator==(const JsonScalarLexer&) const = default;

 private:
  enum class Mode : uint8_t {
    kString,        // inside a string
    kEscape,        // after '\' in a string
    kHex,           // inside \uXXXX: sub_ digits read, hex_ their value
    kUtf8,          // inside a multi-byte UTF-8 character: sub_ bytes left, next in [lo_, hi_]
    kNumMinus,      // '-': a digit must follow
    kNumZero,       // a leading 0: '.', 'e' or the end, no more digits
    kNumInt,        // integer digits (sub_ of them)
    kNumDot,        // '.': a digit must follow
    kNumFrac,       // fraction digits
    kNumExp,        // 'e': a sign or a digit must follow
    kNumExpSign,    // exponent sign: a digit must follow
    kNumExpDigits,  // exponent digits (sub_ of them)
  };
  static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
  static int hex_value(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // A digit counted against a limit (0: none); sub_ saturates where nothing limits it.
  bool count_digit(uint8_t max) {
    if (max == 0) {
      if (sub_ < UINT8_MAX) ++sub_;
      return true;
    }
    return sub_++ < max;
  }

  uint16_t hex_ = 0;
  Mode mode_ = Mode::kString;
  uint8_t sub_ = 0;
  uint8_t lo_ = 0, hi_ = 0;
  bool need_low_ = false;  // a \uD800-\uDBFF escape was read: \uDC00-\uDFFF must follow
  bool integer_ = false;   // the number being read is an integer
};

// Inline: the token mask runs it for every byte of every candidate token.
inline JsonScalarLexer::Result JsonScalarLexer::step(uint8_t c, NumberRules rules) {
  constexpr Result kMore = Result::kMore, kRefused = Result::kRefused;
  switch (mode_) {
    case Mode::kString:
      if (need_low_ && c != '\\') return kRefused;
      if (c == '"') return Result::kEnd;
      if (c == '\\') { mode_ = Mode::kEscape; return kMore; }
      if (c < 0x20) return kRefused;
      if (c < 0x80) return kMore;
      // The first byte of a multi-byte character fixes how many follow and the range of the
      // next one (no overlong forms, no UTF-16 surrogates, nothing past U+10FFFF).
      lo_ = 0x80;
      hi_ = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) {
        sub_ = 1;
      } else if (c >= 0xE0 && c <= 0xEF) {
        sub_ = 2;
        if (c == 0xE0) lo_ = 0xA0;  // not overlong
        if (c == 0xED) hi_ = 0x9F;  // not a surrogate
      } else if (c >= 0xF0 && c <= 0xF4) {
        sub_ = 3;
        if (c == 0xF0) lo_ = 0x90;  // not overlong
        if (c == 0xF4) hi_ = 0x8F;  // not past U+10FFFF
      } else {
        return kRefused;
      }
      mode_ = Mode::kUtf8;
      return kMore;
    case Mode::kUtf8:
      if (c < lo_ || c > hi_) return kRefused;
      lo_ = 0x80;
      hi_ = 0xBF;
      if (--sub_ == 0) mode_ = Mode::kString;
      return kMore;
    case Mode::kEscape:
      if (need_low_ && c != 'u') return kRefused;
      switch (c) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
          mode_ = Mode::kString;
          return kMore;
        case 'u':
          mode_ = Mode::kHex;
          sub_ = 0;
          hex_ = 0;
          return kMore;
        default: return kRefused;
      }
    case Mode::kHex: {
      const int d = hex_value(c);
      if (d < 0) return kRefused;
      // A surrogate must come as a pair (\uD800-\uDBFF then \uDC00-\uDFFF), as strict parsers
      // require; decided on the first two digits.
      if (sub_ == 0 && need_low_ && d != 0xD) return kRefused;
      if (sub_ == 1) {
        const int high_byte = (hex_ << 4) | d;
        const bool low = high_byte >= 0xDC && high_byte <= 0xDF;
        if (need_low_ != low) return kRefused;
      }
      hex_ = static_cast<uint16_t>((hex_ << 4) | d);
      if (++sub_ == 4) {
        need_low_ = !need_low_ && hex_ >= 0xD800 && hex_ <= 0xDBFF;
        mode_ = Mode::kString;
      }
      return kMore;
    }

    case Mode::kNumMinus:
      if (c == '0') { mode_ = Mode::kNumZero; return kMore; }
      if (c >= '1' && c <= '9') { mode_ = Mode::kNumInt; return kMore; }
      return kRefused;
    case Mode::kNumZero:
    case Mode::kNumInt:
      if (is_digit(c)) return mode_ == Mode::kNumInt && count_digit(rules.max_int_digits) ? kMore : kRefused;
      if (c == '.' && !integer_) { mode_ = Mode::kNumDot; return kMore; }
      if ((c == 'e' || c == 'E') && !integer_) { mode_ = Mode::kNumExp; return kMore; }
      return Result::kEndBefore;
    case Mode::kNumDot:
      if (!is_digit(c)) return kRefused;
      mode_ = Mode::kNumFrac;
      return kMore;
    case Mode::kNumFrac:
      if (is_digit(c)) return kMore;
      if (c == 'e' || c == 'E') { mode_ = Mode::kNumExp; return kMore; }
      return Result::kEndBefore;
    case Mode::kNumExp:
      if (c == '+' || c == '-') { mode_ = Mode::kNumExpSign; return kMore; }
      [[fallthrough]];
    case Mode::kNumExpSign:
      if (!is_digit(c)) return kRefused;
      mode_ = Mode::kNumExpDigits;
      sub_ = 1;  // exponent digits read
      return kMore;
    case Mode::kNumExpDigits:
      if (is_digit(c)) return count_digit(rules.max_exp_digits) ? kMore : kRefused;
      return Result::kEndBefore;
  }
  return kRefused;
}

}  // namespace hymoe::server
