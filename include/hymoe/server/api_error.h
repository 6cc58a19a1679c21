// An error as the OpenAI API reports it: HTTP status + {"error":{"message","type","param","code"}}.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "hymoe/common/error.h"

namespace hymoe::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // invalid_request_error | authentication_error |
                                               // not_found_error | rate_limit_error | server_error
  std::optional<std::string> param;            // the request field concerned
  std::optional<std::string> code;             // e.g. "model_not_found", "context_length_exceeded"

  static ApiError invalid(std::string message, std::optional<std::string> param = std::nullopt,
                          std::optional<std::string> code = std::nullopt);
  // Maps an internal error to a status: kInvalidArgument 400, kNotFound 404,
  // kResourceExhausted 429, kUnavailable 503, everything else 500 (message kept, location dropped).
  static ApiError from(const Error& e);

  // Strings are made valid UTF-8 (invalid bytes become U+FFFD), so both always serialise.
  nlohmann::json to_json() const;
  // to_json().dump(); kFallbackBody if even that fails (out of memory): never throws, so an
  // error response can always be built.
  std::string body() const noexcept;

  static constexpr const char* kFallbackBody =
      R"({"error":{"message":"internal error while reporting an error","type":"server_error","param":null,"code":null}})";
};

// Thrown by request parsing; carries the ApiError to send.
class ApiException : public std::exception {
 public:
  explicit ApiException(ApiError error) : error_(std::move(error)) {}
  const ApiError& error() const { return error_; }
  const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  ApiError error_;
};

}  // namespace hymoe::server
