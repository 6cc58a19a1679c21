// UTF-8 helpers: WHATWG replacement cases and random round trips.
#include "hymoe/tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>

#include "js_reference.h"

namespace hymoe::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidityMatchesTheStandard) {
  EXPECT_TRUE(utf8::is_valid("plain ascii"));
  EXPECT_TRUE(utf8::is_valid("\xE4\xBD\xA0\xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(utf8::is_valid("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(utf8::is_valid("\xE4\xBD"));          // truncated
}

TEST(Utf8, SanitizeReplacesMaximalSubparts) {
  // Cases from the Unicode standard's "U+FFFD substitution of maximal subparts" table.
  EXPECT_EQ(utf8::sanitize("a\xF1\x80\x80"), "a" + kFffd);
  EXPECT_EQ(utf8::sanitize("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"),
            kFffd + kFffd + kFffd + kFffd + "A");
  EXPECT_EQ(utf8::sanitize("\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41"),
            kFffd + kFffd + kFffd + kFffd + kFffd + kFffd + kFffd + kFffd + "A");
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80\x41"), kFffd + kFffd + kFffd + "A");
  EXPECT_EQ(utf8::sanitize("\xF4\x91\x92\x93\xFF\x41\x80\xBF\x42"),
            kFffd + kFffd + kFffd + kFffd + kFffd + "A" + kFffd + kFffd + "B");
}

TEST(Utf8, CompletePrefixHoldsOnlyAnUnfinishedCharacter) {
  EXPECT_EQ(utf8::complete_prefix("ab\xE4\xBD"), 2u);
  EXPECT_EQ(utf8::complete_prefix("ab\xE4\xBD\xA0"), 5u);
  EXPECT_EQ(utf8::complete_prefix("ab\xFF"), 3u);      // never valid: released (as U+FFFD)
  EXPECT_EQ(utf8::complete_prefix("a\xE4\x41"), 3u);   // broken lead released, A complete
  EXPECT_EQ(utf8::complete_prefix("\xF0\x9F\x98"), 0u);
}

TEST(Utf8, RandomCodePointsRoundTrip) {
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    for (int k = 0; k < 20; ++k) {
      uint32_t cp = rng() % 0x110000;
      if (cp >= 0xD800 && cp <= 0xDFFF) cp -= 0x1000;
      utf8::append(s, cp);
    }
    ASSERT_TRUE(utf8::is_valid(s));
    ASSERT_EQ(utf8::sanitize(s), s);
    ASSERT_EQ(utf8::complete_prefix(s), s.size());
    const size_t cut = rng() % s.size();
    const std::string head = s.substr(0, cut);
    const size_t n = utf8::complete_prefix(head);
    EXPECT_TRUE(utf8::is_valid(head.substr(0, n)));
    EXPECT_LE(head.size() - n, 3u);
  }
}

}  // namespace
}  // namespace hymoe::tokenizer
