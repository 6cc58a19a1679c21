// Errors of the control plane: an exception that carries where it was raised and what it
// concerns (a file, a tensor, a request field). Hot loops never throw; they return status codes
// and the caller raises one of these with context.
#pragma once

#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace hymoe {

// What went wrong, coarse enough to map onto an HTTP status at the server boundary.
enum class ErrorKind {
  kInvalidArgument,  // bad user input: 400
  kNotFound,         // missing file, tensor, model: 404
  kCorruptData,      // malformed checkpoint or file contents
  kUnsupported,      // valid but not handled by this build or model
  kResourceExhausted,// out of memory / KV budget / queue full: 429 or 413
  kUnavailable,      // not ready (loading) or shutting down: 503
  kIo,               // operating-system I/O failure
  kInternal,         // a bug: 500
};

std::string_view error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message,
        std::source_location where = std::source_location::current());

  ErrorKind kind() const { return kind_; }
  // The message without the source location (what a user should see).
  const std::string& message() const { return message_; }
  // "file.cpp:123" of the throw site.
  const std::string& where() const { return where_; }

 private:
  ErrorKind kind_;
  std::string message_;
  std::string where_;
};

// Formats and throws an Error. Usage: throw_error(ErrorKind::kCorruptData, "{}: bad {}", f, x);
template <typename... Args>
[[noreturn]] void throw_error_at(std::source_location where, ErrorKind kind,
                                 fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...), where);
}

}  // namespace hymoe

// HYMOE_THROW(kind, "fmt", args...): throw hymoe::Error with this source location.
#define HYMOE_THROW(kind, ...) \
  ::hymoe::throw_error_at(std::source_location::current(), ::hymoe::ErrorKind::kind, __VA_ARGS__)

// HYMOE_CHECK(cond, kind, "fmt", args...): throw when cond is false.
#define HYMOE_CHECK(cond, kind, ...)        \
  do {                                      \
    if (!(cond)) [[unlikely]] {             \
      HYMOE_THROW(kind, __VA_ARGS__);       \
    }                                       \
  } while (0)
