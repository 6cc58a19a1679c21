#include "hymoe/server/api_error.h"

#include <nlohmann/json.hpp>

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
  nlohmann::json inner = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) inner["param"] = *param;
  if (code) inner["code"] = *code;
  return {{"error", inner}};
}

std::string ApiError::body() const { return to_json().dump(); }

}  // namespace hymoe::server
