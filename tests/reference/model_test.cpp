// The whole reference model on in-memory random weights: the two MLA forms agree, prefill then
// decode equals recomputation, and bad inputs are clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "hymoe/common/error.h"
#include "linear.h"
#include "mlp.h"
#include "rmsnorm.h"
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

// The layer structure, rebuilt from the pieces and the trace: h += attn(norm(h)),
// h += ffn(norm(h)), logits = lm_head(norm(h)); routing as moe() decides it.
TEST_F(ReferenceModelTest, TraceMatchesTheLayerStructure) {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = store_.weights();
  const size_t H = static_cast<size_t>(c.hidden_size);
  const int64_t V = c.vocab_size;
  const std::vector<int64_t> toks = {5, 77, 300};
  LatentKvCache cache = model_.new_cache();
  ForwardTrace trace;
  const auto logits = model_.forward(toks, 0, cache, MlaForm::kAbsorbed, &trace);
  ASSERT_EQ(trace.after_attention.size(), 3u);
  auto tok = [&](const std::vector<float>& v, size_t i) {
    return std::vector<float>(v.begin() + static_cast<ptrdiff_t>(i * H),
                              v.begin() + static_cast<ptrdiff_t>((i + 1) * H));
  };
  // Layer 0 attention from scratch: norm, latent into a fresh cache, query, attend.
  LatentKvCache own(1, c.kv_lora_rank, c.qk_rope_head_dim);
  std::vector<float> normed(H), delta = testing::nan_vector(H);
  for (size_t i = 0; i < toks.size(); ++i) {
    const std::vector<float> e = dense_row(w.embed, toks[i]);
    rmsnorm(e, w.layers[0].input_norm, c.rms_norm_eps, normed);
    const MlaLatent lat = mla_latent(w.layers[0].attn, c, model_.rope(), normed, static_cast<int64_t>(i));
    own.append(0, lat.c_kv, lat.k_pe);
    const auto q = mla_query(w.layers[0].attn, c, model_.rope(), normed, static_cast<int64_t>(i));
    mla_attend(w.layers[0].attn, c, model_.rope(), q, own, 0, static_cast<int64_t>(i) + 1,
               MlaForm::kNaive, delta);
    std::vector<double> expect(H);
    for (size_t k = 0; k < H; ++k) expect[k] = double{e[k]} + delta[k];
    EXPECT_LT(rel_error(tok(trace.after_attention[0], i), expect), 1e-6) << "token " << i;
  }
  const RoutingParams rp = RoutingParams::from_config(c);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    EXPECT_EQ(trace.routing[l].size(), lw.moe ? toks.size() : 0u);
    for (size_t i = 0; i < toks.size(); ++i) {
      const std::vector<float> a = tok(trace.after_attention[l], i);
      rmsnorm(a, lw.post_attn_norm, c.rms_norm_eps, normed);
      delta = testing::nan_vector(H);
      if (lw.moe) {
        std::vector<ExpertChoice> chosen;
        moe(*lw.moe, rp, normed, delta, &chosen);
        ASSERT_EQ(chosen.size(), trace.routing[l][i].size());
        for (size_t k = 0; k < chosen.size(); ++k) {
          EXPECT_EQ(chosen[k].expert, trace.routing[l][i][k].expert);
        }
      } else {
        mlp(*lw.dense, normed, delta);
      }
      std::vector<double> expect(H);
      for (size_t k = 0; k < H; ++k) expect[k] = double{a[k]} + delta[k];
      EXPECT_LT(rel_error(tok(trace.after_ffn[l], i), expect), 1e-6) << "layer " << l;
    }
  }
  for (size_t i = 0; i < toks.size(); ++i) {
    rmsnorm(tok(trace.after_ffn[2], i), w.final_norm, c.rms_norm_eps, normed);
    std::vector<float> expect = testing::nan_vector(static_cast<size_t>(V));
    linear(w.lm_head, normed, expect);
    EXPECT_LT(rel_error(row(logits, static_cast<int64_t>(i), V), expect), 1e-6);
  }
}

// Other shapes of the architecture through the whole model: Kimi-K2's single router group and
// scaling factor, no shared expert, no rope scaling, two dense layers, 3 heads.
TEST(ReferenceModelVariants, FormsAgreeAndDecodeMatchesRecompute) {
  std::vector<ModelConfig> variants;
  ModelConfig kimi = testing::tiny_test_config(300);
  kimi.n_group = 1;
  kimi.topk_group = 1;
  kimi.routed_scaling_factor = 2.827;
  variants.push_back(kimi);
  ModelConfig plain = testing::tiny_test_config(300);
  plain.n_shared_experts = 0;
  plain.rope_scaling.reset();
  plain.first_k_dense_replace = 2;
  plain.num_attention_heads = 3;
  plain.num_key_value_heads = 3;
  variants.push_back(plain);
  const std::vector<int64_t> toks = {299, 0, 150, 42, 7};
  for (size_t v = 0; v < variants.size(); ++v) {
    testing::RandomWeights store(variants[v], 70 + v);
    const ReferenceModel model(store.weights());
    const int64_t V = model.config().vocab_size;
    const auto naive = model.forward(toks, MlaForm::kNaive);
    const auto absorbed = model.forward(toks, MlaForm::kAbsorbed);
    LatentKvCache cache = model.new_cache();
    model.forward(std::span(toks).first(2), 0, cache, MlaForm::kAbsorbed);
    for (size_t i = 0; i < toks.size(); ++i) {
      EXPECT_LT(rel_error(row(absorbed, i, V), row(naive, i, V)), 1e-5) << "variant " << v;
      if (i >= 2) {
        const auto step = model.forward(std::span(toks).subspan(i, 1), static_cast<int64_t>(i),
                                         cache, MlaForm::kAbsorbed);
        EXPECT_LT(rel_error(row(step, 0, V), row(absorbed, i, V)), 1e-6) << "variant " << v;
      }
    }
  }
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
