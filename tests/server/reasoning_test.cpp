#include "hymoe/server/reasoning.h"

#include <gtest/gtest.h>

#include <random>

namespace hymoe::server {
namespace {

// Feeds `text` cut at random points; returns (reasoning, content).
std::pair<std::string, std::string> split(bool start_inside, const std::string& text, std::mt19937& rng) {
  ReasoningSplitter s(start_inside);
  std::string r, c;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = 1 + rng() % 5;
    auto d = s.push(std::string_view(text).substr(i, n));
    r += d.reasoning;
    c += d.content;
    i += n;
  }
  auto d = s.finish();
  return {r + d.reasoning, c + d.content};
}

TEST(ReasoningSplitter, SplitsAtCloseTagWhateverTheCuts) {
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(split(true, "let me think</think>\n\nThe answer is 4.", rng),
              std::make_pair(std::string("let me think"), std::string("\n\nThe answer is 4.")));
    EXPECT_EQ(split(false, "<think>hmm < / think</think>ok", rng),
              std::make_pair(std::string("hmm < / think"), std::string("ok")));
    EXPECT_EQ(split(false, "plain answer with </think> inside", rng),
              std::make_pair(std::string(), std::string("plain answer with </think> inside")));
    EXPECT_EQ(split(true, "unfinished thought </thi", rng),
              std::make_pair(std::string("unfinished thought </thi"), std::string()));
    EXPECT_EQ(split(false, "<thin", rng), std::make_pair(std::string(), std::string("<thin")));
  }
}

TEST(ReasoningSplitter, PromptDetection) {
  EXPECT_TRUE(prompt_opens_thinking("<｜User｜>hi<｜Assistant｜><think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<｜User｜>hi<｜Assistant｜></think>"));
  EXPECT_FALSE(prompt_opens_thinking("<｜User｜>hi<｜Assistant｜>"));
}

}  // namespace
}  // namespace hymoe::server
