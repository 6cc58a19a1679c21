#include "hymoe/common/error.h"

#include <gtest/gtest.h>

#include "hymoe/common/log.h"

namespace hymoe {
namespace {

TEST(Error, CarriesKindMessageAndLocation) {
  try {
    HYMOE_THROW(kCorruptData, "{}: tensor '{}' ends past the file", "a.safetensors", "w");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruptData);
    EXPECT_EQ(e.message(), "a.safetensors: tensor 'w' ends past the file");
    EXPECT_NE(e.where().find("error_test.cpp:"), std::string::npos) << e.where();
    EXPECT_NE(std::string(e.what()).find(e.where()), std::string::npos);
  }
}

TEST(Error, CheckThrowsOnlyWhenFalse) {
  EXPECT_NO_THROW(HYMOE_CHECK(1 + 1 == 2, kInternal, "never"));
  EXPECT_THROW(HYMOE_CHECK(1 + 1 == 3, kInvalidArgument, "bad {}", 3), Error);
}

TEST(Log, NamedLoggersAndLevels) {
  auto a = log::get("server");
  auto b = log::get("server");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a->name(), "server");
  log::set_level("warn");
  EXPECT_EQ(log::get("load")->level(), spdlog::level::warn);
  EXPECT_EQ(a->level(), spdlog::level::warn);
  EXPECT_THROW(log::set_level("loud"), Error);
  log::set_level("info");
}

}  // namespace
}  // namespace hymoe
