// ChunkedFraming: checks a chunked request body (RFC 9112 7.1) byte by byte as it is read.
//
// cpp-httplib 0.11's chunked decoder parses a size line with strtoul and so takes " 1a", "0x1a",
// "1azz" and "-2" (the last as a size near 2^64: the read then waits for the read timeout), and
// a chunk followed by anything but CRLF ends the body early, the rest then read as the next
// request. HttpCore feeds every body byte httplib reads through this check first and fails the
// read at the first byte that breaks the grammar, so httplib answers 400 at once. Accepted:
//   chunk      = 1*HEXDIG [ *(SP / HTAB) ";" ext ] CRLF data CRLF   (ext: visible bytes, <= 1 KiB)
//   last-chunk = 1*"0" [ ext as above ] CRLF CRLF                    (no trailer fields: httplib
//                                                                     refuses them too)
// Plain state machine: no allocation, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hymoe::server {

class ChunkedFraming {
 public:
  // Sizes above this are refused as malformed (httplib's strtoul would saturate long before a
  // read could finish; the request byte budget refuses large real bodies with 413).
  static constexpr uint64_t kMaxChunkSize = uint64_t{1} << 48;
  static constexpr size_t kMaxExtensionBytes = 1024;

  // Checks the next `n` bytes of the body. False at the first byte that breaks the framing (and
  // for every call after it, and for bytes after the end of the body); problem() says why.
  bool feed(const char* bytes, size_t n);

  // Whether the last chunk and the final CRLF have been read.
  bool done() const { return state_ == State::kDone; }
  // Why the framing is invalid, or nullptr while it is not.
  const char* problem() const { return problem_; }

 private:
  enum class State : uint8_t {
    kSizeFirst,  // the first hex digit of a size line
    kSize,       // more hex digits, or what follows them
    kSizeSpace,  // whitespace after the size: only ";" may follow
    kExtension,  // a chunk extension, up to CR
    kSizeLf,     // LF ending the size line
    kData,       // chunk data, remaining_ bytes left
    kDataCr,     // CR after the data
    kDataLf,     // LF after the data
    kEndCr,      // after the last chunk: CR of the final CRLF (a trailer field is refused)
    kEndLf,      // LF of the final CRLF
    kDone,
    kInvalid,
  };

  bool fail(const char* why);

  State state_ = State::kSizeFirst;
  uint64_t size_ = 0;       // the size being parsed
  uint64_t remaining_ = 0;  // data bytes left in the current chunk
  size_t extension_bytes_ = 0;
  const char* problem_ = nullptr;
};

}  // namespace hymoe::server
