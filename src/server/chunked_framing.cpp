#include "chunked_framing.h"

#include <algorithm>

namespace hymoe::server {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Bytes allowed in a chunk extension: visible ASCII, SP, HTAB and obs-text (as in field values).
bool extension_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

}  // namespace

bool ChunkedFraming::fail(const char* why) {
  if (state_ != State::kInvalid) problem_ = why;
  state_ = State::kInvalid;
  return false;
}

bool ChunkedFraming::feed(const char* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const char c = bytes[i];
    switch (state_) {
      case State::kSizeFirst: {
        const int v = hex_value(c);
        if (v < 0) return fail("a chunk size must start with a hexadecimal digit");
        size_ = static_cast<uint64_t>(v);
        state_ = State::kSize;
        break;
      }
      case State::kSize: {
        if (const int v = hex_value(c); v >= 0) {
          size_ = size_ * 16 + static_cast<uint64_t>(v);
          if (size_ > kMaxChunkSize) return fail("chunk size too large");
        } else if (c == ';') {
          extension_bytes_ = 0;
          state_ = State::kExtension;
        } else if (c == ' ' || c == '\t') {
          state_ = State::kSizeSpace;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
        } else {
          return fail("a chunk size must be hexadecimal digits followed by CRLF or an extension");
        }
        break;
      }
      case State::kSizeSpace:
        if (c == ';') {
          extension_bytes_ = 0;
          state_ = State::kExtension;
        } else if (c != ' ' && c != '\t') {
          return fail("only a chunk extension (\";...\") may follow whitespace after a chunk size");
        }
        break;
      case State::kExtension:
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (!extension_byte(c)) {
          return fail("invalid byte in a chunk extension");
        } else if (++extension_bytes_ > kMaxExtensionBytes) {
          return fail("chunk extension too long");
        }
        break;
      case State::kSizeLf:
        if (c != '\n') return fail("a chunk size line must end in CRLF");
        remaining_ = size_;
        state_ = size_ == 0 ? State::kEndCr : State::kData;
        break;
      case State::kData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, n - i));
        remaining_ -= take;
        i += take - 1;  // the loop's ++i steps past the last data byte taken
        if (remaining_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c != '\r') return fail("chunk data longer than its size (no CRLF after it)");
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return fail("chunk data must be followed by CRLF");
        state_ = State::kSizeFirst;
        break;
      case State::kEndCr:
        if (c != '\r') return fail("trailer fields after the last chunk are not supported");
        state_ = State::kEndLf;
        break;
      case State::kEndLf:
        if (c != '\n') return fail("the chunked body must end in CRLF after the last chunk");
        state_ = State::kDone;
        break;
      case State::kDone:
        return fail("bytes after the end of the chunked body");
      case State::kInvalid:
        return false;
    }
  }
  return true;
}

}  // namespace hymoe::server
