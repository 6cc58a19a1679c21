#include "hymoe/common/error.h"

#include <string>

namespace hymoe {
namespace {

std::string short_file(const char* path) {
  std::string_view p(path);
  // Keep the path from the project's top folder on ("src/model/safetensors.cpp").
  for (std::string_view top : {"/src/", "/kernels/", "/tests/", "/include/", "/bench/"}) {
    if (auto pos = p.rfind(top); pos != std::string_view::npos) return std::string(p.substr(pos + 1));
  }
  if (auto pos = p.rfind('/'); pos != std::string_view::npos) return std::string(p.substr(pos + 1));
  return std::string(p);
}

}  // namespace

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid_argument";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kCorruptData: return "corrupt_data";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kResourceExhausted: return "resource_exhausted";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kIo: return "io_error";
    case ErrorKind::kInternal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, std::string message, std::source_location where)
    : std::runtime_error(fmt::format("{} [{}:{}]", message, short_file(where.file_name()),
                                     where.line())),
      kind_(kind),
      message_(std::move(message)),
      where_(fmt::format("{}:{}", short_file(where.file_name()), where.line())) {}

}  // namespace hymoe
