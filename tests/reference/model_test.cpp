// The whole reference model on in-memory random weights: the two MLA forms agree, prefill then
// decode equals recomputation, and bad inputs are clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "hymoe/common/error.h"
#include "random_weights.h"
#include "reference_model.h"
#include "test_util.h"

namespace hymoe::reference {
namespace {

using testing::rel_error;

std::span<const float> row(const std::vector<float>& logits, int64_t i, int64_t vocab) {
  return std::span<const float>(logits).subspan(static_cast<size_t>(i * vocab),
                                                static_cast<size_t>(vocab));
}

class ReferenceModelTest : public ::testing::Test {
 protected:
  ReferenceModelTest() : store_(testing::tiny_test_config(), 61), model_(store_.weights()) {}
  testing::RandomWeights store_;
  ReferenceModel model_;
  const std::vector<int64_t> tokens_ = {3, 141, 59, 265, 358, 97, 93, 238, 46};
};

TEST_F(ReferenceModelTest, LogitsAreFiniteAndPositionDependent) {
  const int64_t V = model_.config().vocab_size;
  const std::vector<float> logits = model_.forward(tokens_, MlaForm::kAbsorbed);
  ASSERT_EQ(logits.size(), tokens_.size() * static_cast<size_t>(V));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // Not a constant output: rows differ and spread out.
  EXPECT_GT(rel_error(row(logits, 0, V), row(logits, 1, V)), 1e-2);
  // The same token at another position after other context gives other logits.
  const std::vector<int64_t> again = {tokens_[0]};
  const std::vector<float> alone = model_.forward(again, MlaForm::kAbsorbed);
  EXPECT_LT(rel_error(row(logits, 0, V), row(alone, 0, V)), 1e-7);  // causal: pos 0 sees only itself
}

TEST_F(ReferenceModelTest, NaiveEqualsAbsorbed) {
  const int64_t V = model_.config().vocab_size;
  const auto naive = model_.forward(tokens_, MlaForm::kNaive);
  const auto absorbed = model_.forward(tokens_, MlaForm::kAbsorbed);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    EXPECT_LT(rel_error(row(absorbed, i, V), row(naive, i, V)), 1e-5) << "position " << i;
  }
}

TEST_F(ReferenceModelTest, PrefillThenDecodeEqualsRecompute) {
  const int64_t V = model_.config().vocab_size;
  for (MlaForm form : {MlaForm::kNaive, MlaForm::kAbsorbed}) {
    const auto full = model_.forward(tokens_, form);
    LatentKvCache cache = model_.new_cache();
    const size_t prefill = 5;
    const auto first = model_.forward(std::span(tokens_).first(prefill), 0, cache, form);
    EXPECT_EQ(cache.size(), 5);
    for (size_t i = 0; i < prefill; ++i) {
      EXPECT_LT(rel_error(row(first, i, V), row(full, i, V)), 1e-6);
    }
    for (size_t i = prefill; i < tokens_.size(); ++i) {
      const auto step = model_.forward(std::span(tokens_).subspan(i, 1),
                                       static_cast<int64_t>(i), cache, form);
      EXPECT_LT(rel_error(row(step, 0, V), row(full, i, V)), 1e-6) << "decode position " << i;
    }
    EXPECT_EQ(cache.size(), static_cast<int64_t>(tokens_.size()));
  }
}

TEST_F(ReferenceModelTest, BadInputsAreErrorsAndLeaveTheCacheAlone) {
  LatentKvCache cache = model_.new_cache();
  const std::vector<int64_t> empty;
  const std::vector<int64_t> too_big = {1, model_.config().vocab_size};
  const std::vector<int64_t> negative = {-1};
  EXPECT_THROW(model_.forward(empty, 0, cache, MlaForm::kNaive), Error);
  EXPECT_THROW(model_.forward(too_big, 0, cache, MlaForm::kNaive), Error);
  EXPECT_THROW(model_.forward(negative, 0, cache, MlaForm::kNaive), Error);
  EXPECT_EQ(cache.size(), 0);
  const std::vector<int64_t> ok = {1, 2};
  EXPECT_THROW(model_.forward(ok, 1, cache, MlaForm::kNaive), Error);  // start != cache size
  model_.forward(ok, 0, cache, MlaForm::kNaive);
  EXPECT_THROW(model_.forward(ok, 0, cache, MlaForm::kNaive), Error);
  LatentKvCache other(2, 256, 32);
  EXPECT_THROW(model_.forward(ok, 0, other, MlaForm::kNaive), Error);
}

TEST(ReferenceModelWeights, MismatchedWeightsAreNamed) {
  testing::RandomWeights store(testing::tiny_test_config(), 62);
  ModelWeights w = store.weights();
  w.layers[1].attn.kv_b.rows -= 1;
  try {
    ReferenceModel model(w);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("model.layers.1.self_attn.kv_b_proj.weight"), std::string::npos)
        << e.message();
  }
  w = store.weights();
  w.layers[2].moe->experts.pop_back();
  EXPECT_THROW(ReferenceModel{w}, Error);
  w = store.weights();
  w.layers[0].dense.reset();
  EXPECT_THROW(ReferenceModel{w}, Error);
}

}  // namespace
}  // namespace hymoe::reference
