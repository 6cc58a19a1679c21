// JSON mode's per-sequence constraint on a hand-made vocabulary: which logits it sets to -inf,
// when end-of-sequence is allowed, and the thought (free text until "</think>") before the JSON.
#include "hymoe/server/json_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hymoe/common/error.h"

namespace hymoe::server {
namespace {

// id 0 is end-of-sequence (special), id 1 another special token; the rest are text.
const std::vector<std::string> kVocab = {
    "<eos>", "<special>", "{", "}", "\"", "a", ":", "1", " ", "</think>", "</", "think>",
    "think>{", "think>x", "}x", "</think>\n{", "\"a\":1}", "<", "think>  ",
};
constexpr int32_t kEos = 0;

int32_t id_of(const std::string& text) {
  for (size_t i = 0; i < kVocab.size(); ++i) {
    if (kVocab[i] == text) return static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no token " << text;
  return -1;
}

std::shared_ptr<const JsonModeVocab> vocab() {
  static const auto v = std::make_shared<const JsonModeVocab>(kVocab, std::vector<int32_t>{1}, kEos);
  return v;
}

// The ids the mask leaves finite, out of a row of zeros (one padding row past the vocabulary).
std::vector<int32_t> allowed(TokenConstraint& c) {
  std::vector<float> logits(kVocab.size() + 1, 0.0f);
  c.mask(logits);
  std::vector<int32_t> out;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

bool allows(TokenConstraint& c, const std::string& token) {
  const auto a = allowed(c);
  return std::find(a.begin(), a.end(), id_of(token)) != a.end();
}

TEST(JsonConstraint, EndOnlyOnceTheObjectIsWholeThenOnlyEnd) {
  auto c = JsonConstraintFactory(vocab(), false).start();
  EXPECT_EQ(allowed(*c), (std::vector<int32_t>{id_of("{"), id_of(" ")}));
  EXPECT_FALSE(c->accept(kEos));
  EXPECT_FALSE(c->accept(id_of("}")));  // refused: the state stays at the start
  EXPECT_FALSE(c->accept(1));           // special tokens are never JSON
  ASSERT_TRUE(c->accept(id_of("{")));
  EXPECT_TRUE(allows(*c, "}"));
  EXPECT_TRUE(allows(*c, "\"a\":1}"));
  EXPECT_FALSE(allows(*c, "}x"));
  EXPECT_FALSE(allows(*c, "<eos>"));
  ASSERT_TRUE(c->accept(id_of("\"a\":1}")));
  // Whole: end-of-sequence alone, not even whitespace.
  EXPECT_EQ(allowed(*c), std::vector<int32_t>{kEos});
  EXPECT_FALSE(c->accept(id_of(" ")));
  EXPECT_TRUE(c->accept(kEos));
}

TEST(JsonConstraint, KeepsTheLogitsItAllows) {
  auto c = JsonConstraintFactory(vocab(), false).start();
  std::vector<float> logits(kVocab.size(), 0.0f);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.5f * static_cast<float>(i) - 3.0f;
  const auto before = logits;
  c->mask(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) {
      EXPECT_EQ(logits[i], before[i]) << i;
    }
  }
  EXPECT_TRUE(std::isinf(logits[kEos]));
}

TEST(JsonConstraint, ThoughtIsFreeTextUntilItClosesIntoJson) {
  auto c = JsonConstraintFactory(vocab(), true).start();
  // In the thought: anything but the end, and no close followed by bytes JSON refuses.
  EXPECT_FALSE(allows(*c, "<eos>"));
  EXPECT_TRUE(allows(*c, "}"));
  EXPECT_TRUE(allows(*c, "a"));
  EXPECT_TRUE(allows(*c, "<special>"));
  EXPECT_TRUE(allows(*c, "</think>"));
  EXPECT_TRUE(allows(*c, "</think>\n{"));
  EXPECT_FALSE(c->accept(kEos));
  ASSERT_TRUE(c->accept(id_of("}")));
  ASSERT_TRUE(c->accept(id_of("</")));
  ASSERT_TRUE(c->accept(1));  // a special token is no text: the close may still complete
  // "</" then "think>x" would close the thought into "x".
  EXPECT_FALSE(allows(*c, "think>x"));
  EXPECT_TRUE(allows(*c, "think>{"));
  EXPECT_TRUE(allows(*c, "think>  "));
  EXPECT_FALSE(c->accept(id_of("think>x")));
  ASSERT_TRUE(c->accept(id_of("think>")));
  // The answer: JSON from its first byte.
  EXPECT_EQ(allowed(*c), (std::vector<int32_t>{id_of("{"), id_of(" ")}));
  ASSERT_TRUE(c->accept(id_of("{")));
  ASSERT_TRUE(c->accept(id_of("}")));
  EXPECT_TRUE(c->accept(kEos));
}

TEST(JsonConstraint, CloseInsideOneTokenStartsTheAnswer) {
  auto c = JsonConstraintFactory(vocab(), true).start();
  ASSERT_TRUE(c->accept(id_of("a")));
  ASSERT_TRUE(c->accept(id_of("</think>\n{")));
  EXPECT_TRUE(allows(*c, "}"));
  EXPECT_FALSE(allows(*c, "{"));
  // A "<" that does not continue into the close restarts the match at the next "<".
  auto d = JsonConstraintFactory(vocab(), true).start();
  ASSERT_TRUE(d->accept(id_of("<")));
  ASSERT_TRUE(d->accept(id_of("</")));
  EXPECT_FALSE(allows(*d, "think>x"));
}

TEST(JsonConstraint, EachSequenceHasItsOwnState) {
  JsonConstraintFactory f(vocab(), false);
  auto a = f.start();
  auto b = f.start();
  ASSERT_TRUE(a->accept(id_of("{")));
  EXPECT_TRUE(allows(*a, "}"));
  EXPECT_FALSE(allows(*b, "}"));
}

TEST(JsonConstraint, RefusesAnEosOutsideTheVocabulary) {
  EXPECT_THROW(JsonModeVocab(kVocab, {}, static_cast<int32_t>(kVocab.size())), Error);
  EXPECT_THROW(JsonModeVocab(kVocab, {}, -1), Error);
}

}  // namespace
}  // namespace hymoe::server
