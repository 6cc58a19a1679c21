#include "hymoe/server/api_error.h"

#include <nlohmann/json.hpp>

#include "hymoe/server/openai_request.h"

namespace hymoe::server {

ApiError ApiError::invalid(std::string message, std::optional<std::string> param,
                           std::optional<std::string> code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError ApiError::from(const Error& err) {
  ApiError e;
  e.message = err.message();
  switch (err.kind()) {
    case ErrorKind::kInvalidArgument:
      e.status = 400;
      break;
    case ErrorKind::kNotFound:
      e.status = 404;
      e.type = "not_found_error";
      break;
    case ErrorKind::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      break;
    case ErrorKind::kUnavailable:
      e.status = 503;
      e.type = "server_error";
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

nlohmann::json ApiError::to_json() const {
  // Messages and params may quote client bytes (a URL path, a header): made valid UTF-8 here
  // so that serialising the error can never throw.
  nlohmann::json inner = {{"message", to_valid_utf8(message)},
                          {"type", to_valid_utf8(type)},
                          {"param", nullptr},
                          {"code", nullptr}};
  if (param) inner["param"] = to_valid_utf8(*param);
  if (code) inner["code"] = to_valid_utf8(*code);
  return {{"error", inner}};
}

std::string ApiError::body() const noexcept {
  try {
    return to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (...) {
    return kFallbackBody;
  }
}

}  // namespace hymoe::server
