// The CPU executor against the reference forward pass on a generated tiny checkpoint (real
// files, real loader). The executor stores activations and the latent cache in BF16 where the
// reference keeps float32 (and accumulates in float64): the logits of the two agree to a
// normalised error of ~5e-3 (BF16 has 8 significant bits, ~4e-3 relative per rounding).
// That difference can flip a near-tied expert choice (seen: the 4th of 4 experts of one token
// in one layer), which moves the logits by 2-4e-2 from then on. So: every case stays under
// kFlipBound (a wrong head, position, expert weight or cache row gives O(1)), and the typical
// case (the median) under kTolerance.
#include "hymoe/engine/cpu_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <random>

#include "hymoe/cpu/topology.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"
#include "engine_test_util.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

constexpr double kTolerance = 1e-2;
constexpr double kFlipBound = 1e-1;
// Chunked vs one-step recompute in the executor itself: only summation order differs.
constexpr double kRecomputeTolerance = 5e-3;

using test::argmax;
using test::rel_error;

class CpuExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new test::TinyModel("hymoe_cpu_exec", 20261129, 2048);
    store_ = model_->store.get();
    reference_ = model_->reference.get();
    pool_ = model_->pool.get();
  }
  static void TearDownTestSuite() { delete model_; }

  std::unique_ptr<CpuExecutor> make_executor(bool amx_decode_gemv = false) {
    CpuExecutorOptions o;
    o.kv_cache_bytes = 64 << 20;
    o.kv_block_tokens = 16;
    o.amx_decode_gemv = amx_decode_gemv;
    return std::make_unique<CpuExecutor>(*store_, *pool_, o);
  }

  static std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % 2048);
    return t;
  }
  // Reference logits of the last position of `tokens`.
  static std::vector<float> reference_last(const std::vector<int32_t>& tokens) {
    std::vector<int64_t> t(tokens.begin(), tokens.end());
    auto all = reference_->forward(t, reference::MlaForm::kAbsorbed);
    const size_t v = 2048;
    return std::vector<float>(all.end() - static_cast<ptrdiff_t>(v), all.end());
  }

  void check_batch_invariance(CpuExecutor* ex);  // below

  static inline test::TinyModel* model_ = nullptr;
  static inline WeightStore* store_ = nullptr;
  static inline reference::ReferenceModel* reference_ = nullptr;
  static inline cpu::ThreadPool* pool_ = nullptr;
};

// Fp8SpecialIndex on the generated checkpoint (normal weights quantised per block, as a real
// one: special codes far below kMaxFraction): every FP8 matrix gets exactly the codes the
// byte-by-byte reference finds; a matrix of zeros (every code special) keeps the table decode.
TEST_F(CpuExecutorTest, SpecialIndexAttachesEachMatrixsSpecialCodes) {
  ModelWeights w = ModelWeights::bind(*store_);
  const Fp8Matrix& o0 = w.layers[0].attn.o;
  const std::vector<uint8_t> zeros(static_cast<size_t>(o0.rows * o0.cols), 0);
  w.layers[0].attn.o.data = zeros.data();
  const Fp8SpecialIndex index = Fp8SpecialIndex::attach(w, *pool_);
  size_t matrices = 0, codes = 0;
  auto check = [&](const Fp8Matrix& m) {
    if (!m.data) return;
    ++matrices;
    const Fp8SpecialCodes want = kernels::find_fp8_special_codes_reference(m);
    if (m.data == zeros.data()) {
      EXPECT_EQ(m.specials, nullptr);
      EXPECT_EQ(want.count(), zeros.size());
      return;
    }
    ASSERT_NE(m.specials, nullptr) << m.rows << "x" << m.cols;
    EXPECT_EQ(m.specials->row_start, want.row_start);
    EXPECT_EQ(m.specials->col, want.col);
    EXPECT_EQ(m.specials->code, want.code);
    codes += want.count();
  };
  auto check_mlp = [&](const MlpWeights& m) {
    check(m.gate);
    check(m.up);
    check(m.down);
  };
  for (const LayerWeights& l : w.layers) {
    for (const Fp8Matrix* m : {&l.attn.q_a, &l.attn.q_b, &l.attn.kv_a_with_mqa, &l.attn.kv_b, &l.attn.o}) check(*m);
    if (l.dense) check_mlp(*l.dense);
    if (l.moe) {
      if (l.moe->shared) check_mlp(*l.moe->shared);
      for (const MlpWeights& e : l.moe->experts) check_mlp(e);
    }
  }
  EXPECT_EQ(index.matrices(), matrices);
  EXPECT_EQ(index.attached(), matrices - 1);
  EXPECT_EQ(index.codes(), codes);
  EXPECT_GT(codes, 0u);  // (zeros and subnormals of the quantised normal weights)
  EXPECT_LT(static_cast<double>(codes), 1e-3 * static_cast<double>(index.scanned_codes()));
}

TEST_F(CpuExecutorTest, PrefillMatchesReference) {
  auto ex = make_executor();
  std::vector<double> errors;
  for (size_t n : {1u, 5u, 8u, 9u, 40u}) {  // GEMV (<= 8 tokens) and GEMM paths
    auto tokens = random_tokens(n, static_cast<uint32_t>(n));
    BlockTable table;
    ASSERT_TRUE(ex->kv_cache().reserve(table, static_cast<int64_t>(n)));
    StepItem item{&table, tokens, 0, true};
    std::vector<float> logits(2048, NAN);
    ex->forward({&item, 1}, logits);
    EXPECT_EQ(table.tokens, static_cast<int64_t>(n));
    const double err = rel_error(logits, reference_last(tokens));
    EXPECT_LT(err, kFlipBound) << n << " tokens";
    errors.push_back(err);
    std::printf("prefill of %zu tokens: normalised logit error vs reference %.2e\n", n, err);
    ex->kv_cache().release(table);
  }
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() / 2], kTolerance) << "median error";
}

TEST_F(CpuExecutorTest, ChunkedPrefillAndDecodeMatchRecompute) {
  // The KV cache's job: logits after chunked prefill and decode steps equal the executor's own
  // recompute of the whole prefix in one step. Same arithmetic up to summation order (GEMV for
  // <= 8 tokens, GEMM beyond), so the bound is far tighter than against the float reference
  // (whose BF16-vs-float differences can flip a near-tied expert choice).
  auto ex = make_executor();
  auto tokens = random_tokens(30, 77);
  BlockTable table;
  ASSERT_TRUE(ex->kv_cache().reserve(table, 30));
  std::vector<float> logits(2048, NAN), recompute(2048, NAN);
  // 12 + 10 prompt tokens in two chunks, then 8 single-token decode steps.
  size_t at = 0;
  for (size_t n : {12u, 10u, 1u, 1u, 1u, 1u, 1u, 1u, 1u, 1u}) {
    StepItem item{&table, std::span<const int32_t>(tokens).subspan(at, n), static_cast<int64_t>(at), true};
    std::fill(logits.begin(), logits.end(), NAN);
    ex->forward({&item, 1}, logits);
    at += n;
    BlockTable fresh;
    ASSERT_TRUE(ex->kv_cache().reserve(fresh, static_cast<int64_t>(at)));
    StepItem whole{&fresh, std::span<const int32_t>(tokens).first(at), 0, true};
    std::fill(recompute.begin(), recompute.end(), NAN);
    ex->forward({&whole, 1}, recompute);
    ex->kv_cache().release(fresh);
    const double err = rel_error(logits, recompute);
    EXPECT_LT(err, kRecomputeTolerance) << "after " << at << " tokens";
    std::printf("after %zu tokens: chunked/decode vs recompute %.2e\n", at, err);
  }
}

TEST_F(CpuExecutorTest, MixedBatchEqualsSeparateRuns) {
  auto ex = make_executor();
  auto a = random_tokens(7, 1), b = random_tokens(13, 2), c = random_tokens(1, 3);
  BlockTable ta, tb, tc;
  ASSERT_TRUE(ex->kv_cache().reserve(ta, 7));
  ASSERT_TRUE(ex->kv_cache().reserve(tb, 13));
  ASSERT_TRUE(ex->kv_cache().reserve(tc, 1));
  // b's first chunk wants no logits; a and c do.
  StepItem items[3] = {{&ta, a, 0, true}, {&tb, std::span<const int32_t>(b).first(6), 0, false}, {&tc, c, 0, true}};
  std::vector<float> logits(2 * 2048, NAN);
  ex->forward(items, logits);
  EXPECT_LT(rel_error(std::span<const float>(logits).first(2048), reference_last(a)), kFlipBound);
  EXPECT_LT(rel_error(std::span<const float>(logits).subspan(2048), reference_last(c)), kFlipBound);
  StepItem rest{&tb, std::span<const int32_t>(b).subspan(6), 6, true};
  std::vector<float> lb(2048, NAN);
  ex->forward({&rest, 1}, lb);
  EXPECT_LT(rel_error(lb, reference_last(b)), kFlipBound);
  // The batch itself must not change a sequence's result beyond summation order: run a and c
  // alone and compare with the batched logits.
  for (int which = 0; which < 2; ++which) {
    const auto& seq = which == 0 ? a : c;
    BlockTable alone;
    ASSERT_TRUE(ex->kv_cache().reserve(alone, static_cast<int64_t>(seq.size())));
    StepItem one{&alone, seq, 0, true};
    std::vector<float> solo(2048, NAN);
    ex->forward({&one, 1}, solo);
    EXPECT_LT(rel_error(std::span<const float>(logits).subspan(static_cast<size_t>(which) * 2048, 2048), solo),
              kRecomputeTolerance);
    ex->kv_cache().release(alone);
  }
}

// Batch invariance: a sequence's logits are bitwise the same whether its prompt runs alone in
// one chunk or in other chunks beside other prompts and decodes, and whether its decode steps
// run alone or beside 0..9 other decode tokens (more than one GEMV pass) and a prompt chunk.
void CpuExecutorTest::check_batch_invariance(CpuExecutor* ex) {
  const auto a = random_tokens(20, 21);
  constexpr int kDecodeSteps = 6;
  const int32_t V = static_cast<int32_t>(ex->config().vocab_size);
  std::vector<int32_t> generated;  // A's greedy continuation, from the solo run
  std::vector<std::vector<float>> solo;
  {
    BlockTable t;
    ASSERT_TRUE(ex->kv_cache().reserve(t, 20 + kDecodeSteps));
    std::vector<float> lg(static_cast<size_t>(V), NAN);
    StepItem prompt{&t, a, 0, true, false};
    ex->forward({&prompt, 1}, lg);
    solo.push_back(lg);
    for (int step = 0; step < kDecodeSteps; ++step) {
      generated.push_back(argmax(lg));
      StepItem d{&t, std::span<const int32_t>(generated).subspan(generated.size() - 1), 20 + step, true, true};
      ex->forward({&d, 1}, lg);
      solo.push_back(lg);
    }
    ex->kv_cache().release(t);
  }
  // The same sequence in a crowd. Others: a prompt B chunked beside it, and decoders D0..D9 that
  // first get their prompts (one token each) and then decode beside A.
  BlockTable ta, tb;
  ASSERT_TRUE(ex->kv_cache().reserve(ta, 20 + kDecodeSteps));
  const auto b = random_tokens(40, 22);
  ASSERT_TRUE(ex->kv_cache().reserve(tb, 40));
  constexpr int kOthers = 10;
  std::vector<BlockTable> td(kOthers);
  std::vector<std::vector<int32_t>> dtok(kOthers);
  for (int i = 0; i < kOthers; ++i) {
    dtok[i] = random_tokens(1 + kDecodeSteps, static_cast<uint32_t>(30 + i));
    ASSERT_TRUE(ex->kv_cache().reserve(td[i], 1 + kDecodeSteps));
    StepItem p{&td[i], std::span<const int32_t>(dtok[i]).first(1), 0, false, false};
    ex->forward({&p, 1}, {});
  }
  // A's prompt in chunks of 7, 7 and 6, with B's chunks in the same steps.
  std::vector<float> lg;
  const int cuts[4] = {0, 7, 14, 20};
  for (int c = 0; c < 3; ++c) {
    std::vector<StepItem> items;
    items.push_back({&tb, std::span<const int32_t>(b).subspan(static_cast<size_t>(13 * c), 13), 13 * c, false, false});
    items.push_back({&ta, std::span<const int32_t>(a).subspan(static_cast<size_t>(cuts[c]), static_cast<size_t>(cuts[c + 1] - cuts[c])),
                     cuts[c], c == 2, false});
    lg.assign(c == 2 ? static_cast<size_t>(V) : 0, NAN);
    ex->forward(items, lg);
  }
  EXPECT_EQ(std::memcmp(lg.data(), solo[0].data(), sizeof(float) * static_cast<size_t>(V)), 0)
      << "prompt logits differ between one chunk alone and three chunks in a crowd";
  // A's decode steps beside k other decode tokens (k = 0, 3, 7, 9, 10) and, in one step, B's last
  // prompt chunk.
  const int others_per_step[kDecodeSteps] = {0, 3, 7, 9, 10, 5};
  for (int step = 0; step < kDecodeSteps; ++step) {
    std::vector<StepItem> items;
    if (step == 2) items.push_back({&tb, std::span<const int32_t>(b).subspan(39, 1), 39, false, false});
    for (int i = 0; i < others_per_step[step]; ++i) {
      const int64_t at = td[i].tokens;
      items.push_back({&td[i], std::span<const int32_t>(dtok[i]).subspan(static_cast<size_t>(at), 1), at, true, true});
    }
    items.insert(items.begin() + static_cast<ptrdiff_t>(items.size() / 2),
                 StepItem{&ta, std::span<const int32_t>(generated).subspan(static_cast<size_t>(step), 1), 20 + step, true, true});
    size_t rows = 0, mine = 0;
    for (const StepItem& it : items) {
      if (it.table == &ta) mine = rows;
      rows += it.want_logits ? 1 : 0;
    }
    std::vector<float> all(rows * static_cast<size_t>(V), NAN);
    ex->forward(items, all);
    EXPECT_EQ(std::memcmp(all.data() + mine * static_cast<size_t>(V), solo[static_cast<size_t>(step) + 1].data(),
                          sizeof(float) * static_cast<size_t>(V)),
              0)
        << "decode step " << step << " beside " << others_per_step[step] << " other decode tokens";
  }
}

TEST_F(CpuExecutorTest, BatchCompositionDoesNotChangeResults) {
  auto ex = make_executor();
  check_batch_invariance(ex.get());
}

// The dense weights' decode GEMVs on AMX (CpuExecutorOptions::amx_decode_gemv): batch invariance
// holds the same way, and a decode's logits stay within summation-order distance of the default
// kernels' (the same BF16 products, summed by the tile unit in its own order). Where AMX is not
// usable the option is ignored, and there is nothing AMX-specific to test.
TEST_F(CpuExecutorTest, AmxDecodeGemvKeepsBatchInvarianceAndTheResults) {
  auto amx = make_executor(true);
  if (!amx->amx_decode_gemv()) GTEST_SKIP() << "no usable AMX-BF16 on this CPU";
  check_batch_invariance(amx.get());
  auto plain = make_executor(false);
  ASSERT_FALSE(plain->amx_decode_gemv());
  const auto prompt = random_tokens(12, 41);
  const int32_t V = static_cast<int32_t>(plain->config().vocab_size);
  std::vector<std::vector<float>> logits[2];
  CpuExecutor* exs[2] = {plain.get(), amx.get()};
  for (int i = 0; i < 2; ++i) {
    BlockTable t;
    ASSERT_TRUE(exs[i]->kv_cache().reserve(t, 12 + 4));
    std::vector<float> lg(static_cast<size_t>(V), NAN);
    StepItem p{&t, prompt, 0, true, false};
    exs[i]->forward({&p, 1}, lg);
    // The same decode tokens for both (the prompt's tokens again), so the steps stay comparable.
    for (int step = 0; step < 4; ++step) {
      StepItem d{&t, std::span<const int32_t>(prompt).subspan(static_cast<size_t>(step), 1), 12 + step, true, true};
      exs[i]->forward({&d, 1}, lg);
      logits[i].push_back(lg);
    }
    exs[i]->kv_cache().release(t);
  }
  for (size_t step = 0; step < logits[0].size(); ++step)
    EXPECT_LT(rel_error(logits[1][step], logits[0][step]), kRecomputeTolerance) << "decode step " << step;
}

TEST_F(CpuExecutorTest, GreedyGenerationFollowsReference) {
  // 32 greedy steps; the executor's choice must be the reference's best token, or one whose
  // reference logit is within the executor's error of the best (a near tie).
  auto ex = make_executor();
  std::vector<int32_t> seq = random_tokens(6, 9);
  BlockTable table;
  ASSERT_TRUE(ex->kv_cache().reserve(table, 6 + 32));
  std::vector<float> logits(2048, NAN);
  size_t fed = 0;
  int exact = 0;
  for (int step = 0; step < 32; ++step) {
    StepItem item{&table, std::span<const int32_t>(seq).subspan(fed), static_cast<int64_t>(fed), true};
    ex->forward({&item, 1}, logits);
    fed = seq.size();
    auto ref = reference_last(seq);
    const int32_t mine = argmax(logits), best = argmax(ref);
    float spread = 0;
    for (float v : ref) spread = std::max(spread, std::fabs(v));
    EXPECT_LE(ref[static_cast<size_t>(best)] - ref[static_cast<size_t>(mine)], 2 * kFlipBound * spread) << "step " << step;
    exact += mine == best;
    seq.push_back(best);  // follow the reference's path so both see the same history
  }
  EXPECT_GE(exact, 30) << "greedy choices that equal the reference's";
}

}  // namespace
}  // namespace hymoe
