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
