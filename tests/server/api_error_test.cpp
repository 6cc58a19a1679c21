#include "hymoe/server/api_error.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hymoe::server {
namespace {

TEST(ApiError, OpenAiShape) {
  auto e = ApiError::invalid("bad temperature", "temperature");
  auto j = nlohmann::json::parse(e.body());
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "bad temperature");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(e.status, 400);
}

TEST(ApiError, ClientBytesNeverBreakTheBody) {
  // A URL path like /%FF decodes to a lone 0xFF: the body is still valid JSON and UTF-8.
  ApiError e;
  e.status = 404;
  e.message = "no route for GET /\xff\xfe";
  e.param = "\xc0";
  const std::string body = e.body();
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["error"]["message"], "no route for GET /\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(j["error"]["param"], "\xef\xbf\xbd");
}

TEST(ApiError, MapsInternalKinds) {
  EXPECT_EQ(ApiError::from(Error(ErrorKind::kNotFound, "no model")).status, 404);
  EXPECT_EQ(ApiError::from(Error(ErrorKind::kResourceExhausted, "full")).status, 429);
  EXPECT_EQ(ApiError::from(Error(ErrorKind::kUnavailable, "loading")).status, 503);
  auto internal = ApiError::from(Error(ErrorKind::kInternal, "bug"));
  EXPECT_EQ(internal.status, 500);
  EXPECT_EQ(internal.message, "bug");  // no source location leaks to clients
}

}  // namespace
}  // namespace hymoe::server
