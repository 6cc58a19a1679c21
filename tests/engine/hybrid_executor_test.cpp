// The hybrid executor (GPU layers, CPU routed experts) against the reference forward pass and
// the CPU engine on a generated tiny checkpoint; skipped without a CUDA device. Tolerances as
// the CPU engine's test (cpu_executor_test.cpp): BF16 activations and cache against float32 /
// float64 can flip a near-tied expert choice, so every case stays under kFlipBound and the
// typical case under kTolerance.
#include "hymoe/engine/hybrid_executor.h"

#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "hymoe/common/error.h"
#include "hymoe/cpu/topology.h"
#include "hymoe/engine/cpu_executor.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/engine/kv_cache.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/device.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"
#include "engine_test_util.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

constexpr double kTolerance = 1e-2;
constexpr double kFlipBound = 1e-1;
constexpr int64_t kVocab = 2048;

using test::argmax;
using test::rel_error;

class HybridExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (gpu::device_count() == 0) return;
    model_ = new test::TinyModel("hymoe_hybrid_exec", 20261207, kVocab);
    store_ = model_->store.get();
    reference_ = model_->reference.get();
    pool_ = model_->pool.get();
  }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override {
    if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }

  static HybridExecutorOptions options() {
    HybridExecutorOptions o;
    o.kv_cache_bytes = 64 << 20;
    o.kv_block_tokens = 16;
    o.max_step_tokens = 64;
    o.max_gpu_expert_layers = 0;  // the routed experts on the CPU (the hand-off path)
    return o;
  }
  std::unique_ptr<HybridExecutor> make_executor() { return std::make_unique<HybridExecutor>(*store_, *pool_, options()); }

  static std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % kVocab);
    return t;
  }

  static inline test::TinyModel* model_ = nullptr;
  static inline WeightStore* store_ = nullptr;
  static inline reference::ReferenceModel* reference_ = nullptr;
  static inline cpu::ThreadPool* pool_ = nullptr;
};

TEST_F(HybridExecutorTest, DecodeLogitsMatchReferenceAtEveryPosition) {
  // A 6-token prompt, then 64 greedy decode steps along the reference's choices (so both see the
  // same history); the logits of every step against the reference's at that position.
  auto ex = make_executor();
  std::vector<int32_t> seq = random_tokens(6, 41);
  const int steps = 64;
  BlockTable table;
  ASSERT_TRUE(ex->kv_cache().reserve(table, 6 + steps));
  std::vector<std::vector<float>> got;
  std::vector<float> logits(kVocab, NAN);
  {
    StepItem item{&table, seq, 0, true};
    ex->forward({&item, 1}, logits);
    got.push_back(logits);
  }
  // The reference's greedy path (its own best token each step), fed to the executor one token
  // at a time as decode items.
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> t(seq.begin(), seq.end());
    auto all = reference_->forward(t, reference::MlaForm::kAbsorbed);
    seq.push_back(argmax(std::span<const float>(all).last(kVocab)));
    StepItem item{&table, std::span<const int32_t>(seq).last(1), static_cast<int64_t>(seq.size() - 1), true};
    item.decode = true;
    std::fill(logits.begin(), logits.end(), NAN);
    ex->forward({&item, 1}, logits);
    got.push_back(logits);
  }
  EXPECT_EQ(table.tokens, static_cast<int64_t>(seq.size()));
  std::vector<int64_t> t(seq.begin(), seq.end());
  const auto all = reference_->forward(t, reference::MlaForm::kAbsorbed);
  std::vector<double> errors;
  for (size_t i = 0; i < got.size(); ++i) {
    const size_t pos = 5 + i;  // the prompt's last position, then one per decode step
    const double err = rel_error(got[i], std::span<const float>(all).subspan(pos * kVocab, kVocab));
    EXPECT_LT(err, kFlipBound) << "position " << pos;
    errors.push_back(err);
  }
  std::sort(errors.begin(), errors.end());
  std::printf("hybrid decode vs reference, %zu positions: median %.2e, worst %.2e\n", errors.size(),
              errors[errors.size() / 2], errors.back());
  EXPECT_LT(errors[errors.size() / 2], kTolerance) << "median error";
  ex->kv_cache().release(table);
}

TEST_F(HybridExecutorTest, PrefillChunksMatchReference) {
  auto ex = make_executor();
  std::vector<double> errors;
  for (size_t n : {1u, 8u, 9u, 40u, 100u}) {  // 100 > max_step_tokens: the buffers grow
    auto tokens = random_tokens(n, static_cast<uint32_t>(n) + 7);
    BlockTable table;
    ASSERT_TRUE(ex->kv_cache().reserve(table, static_cast<int64_t>(n)));
    StepItem item{&table, tokens, 0, true};
    std::vector<float> logits(kVocab, NAN);
    ex->forward({&item, 1}, logits);
    std::vector<int64_t> t(tokens.begin(), tokens.end());
    auto all = reference_->forward(t, reference::MlaForm::kAbsorbed);
    const double err = rel_error(logits, std::span<const float>(all).last(kVocab));
    EXPECT_LT(err, kFlipBound) << n << " tokens";
    errors.push_back(err);
    ex->kv_cache().release(table);
  }
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() / 2], kTolerance) << "median error";
}

TEST_F(HybridExecutorTest, SameGreedyTokensAsTheCpuEngine) {
  // Each engine decodes greedily on its own; where the CPU engine's top two logits are further
  // apart than the engines' difference can move them, the hybrid must choose the same token.
  auto hy = make_executor();
  CpuExecutorOptions co;
  co.kv_cache_bytes = 64 << 20;
  co.kv_block_tokens = 16;
  CpuExecutor cpu(*store_, *pool_, co);
  const std::vector<int32_t> prompt = random_tokens(7, 5);
  std::vector<int32_t> a = prompt, b = prompt;
  BlockTable ta, tb;
  ASSERT_TRUE(hy->kv_cache().reserve(ta, 7 + 32));
  ASSERT_TRUE(cpu.kv_cache().reserve(tb, 7 + 32));
  std::vector<float> la(kVocab), lb(kVocab);
  int compared = 0;
  for (int step = 0; step < 32; ++step) {
    const size_t fed = step == 0 ? 0 : a.size() - 1;
    StepItem ia{&ta, std::span<const int32_t>(a).subspan(fed), static_cast<int64_t>(fed), true, step > 0};
    StepItem ib{&tb, std::span<const int32_t>(b).subspan(fed), static_cast<int64_t>(fed), true, step > 0};
    hy->forward({&ia, 1}, la);
    cpu.forward({&ib, 1}, lb);
    std::vector<float> sorted = lb;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    float spread = 0;
    for (float v : lb) spread = std::max(spread, std::fabs(v));
    const int32_t ca = argmax(la), cb = argmax(lb);
    if (sorted[0] - sorted[1] > 2 * kTolerance * spread) {
      EXPECT_EQ(ca, cb) << "step " << step;
      ++compared;
    }
    if (ca != cb) break;  // the histories part: nothing more to compare
    a.push_back(ca);
    b.push_back(cb);
  }
  std::printf("greedy steps compared (clear top-2 gap): %d\n", compared);
  EXPECT_GT(compared, 0);
}

TEST_F(HybridExecutorTest, BatchCompositionDoesNotChangeResults) {
  // Sequence A's decode logits are the same bits alone and beside another decode and a prompt
  // chunk in one step.
  auto ex = make_executor();
  auto run = [&](bool crowded) {
    const std::vector<int32_t> pa = random_tokens(10, 1), pb = random_tokens(5, 2), pc = random_tokens(12, 3);
    BlockTable ta, tb, tc;
    EXPECT_TRUE(ex->kv_cache().reserve(ta, 11));
    EXPECT_TRUE(ex->kv_cache().reserve(tb, 6));
    EXPECT_TRUE(ex->kv_cache().reserve(tc, 12));
    std::vector<float> one(kVocab), three(3 * kVocab);
    StepItem a0{&ta, pa, 0, false};
    StepItem b0{&tb, pb, 0, false};
    ex->forward({&a0, 1}, {});
    ex->forward({&b0, 1}, {});
    const int32_t next_a = 17, next_b = 99;
    StepItem a1{&ta, {&next_a, 1}, 10, true, true};
    StepItem b1{&tb, {&next_b, 1}, 5, true, true};
    StepItem c0{&tc, pc, 0, true};
    std::vector<float> out;
    if (crowded) {
      std::vector<StepItem> items = {c0, a1, b1};  // the prompt chunk first: decode rows go first anyway
      ex->forward(items, three);
      out.assign(three.begin() + kVocab, three.begin() + 2 * kVocab);
    } else {
      ex->forward({&a1, 1}, one);
      out = one;
    }
    ex->kv_cache().release(ta);
    ex->kv_cache().release(tb);
    ex->kv_cache().release(tc);
    return out;
  };
  const auto alone = run(false), crowded = run(true);
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(alone[i], crowded[i]) << "logit " << i;
}

TEST_F(HybridExecutorTest, DualMicrobatchGivesTheSameBits) {
  // Three sequences decoding together (and, in one step, a prompt chunk beside them) through two
  // executors, one splitting the step into two micro-batches and one not: the same logits.
  HybridExecutorOptions on = options(), off = options();
  off.dual_microbatch = false;
  HybridExecutor dual(*store_, *pool_, on), single(*store_, *pool_, off);
  auto run = [&](HybridExecutor& ex) {
    std::vector<std::vector<int32_t>> seqs = {random_tokens(5, 11), random_tokens(9, 12), random_tokens(3, 13)};
    const std::vector<int32_t> late = random_tokens(20, 14);
    std::vector<BlockTable> tables(4);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(ex.kv_cache().reserve(tables[i], 40));
    EXPECT_TRUE(ex.kv_cache().reserve(tables[3], 20));
    std::vector<float> all;
    for (size_t i = 0; i < 3; ++i) {
      StepItem p{&tables[i], seqs[i], 0, false};
      ex.forward({&p, 1}, {});
    }
    std::vector<int32_t> next = {7, 8, 9};
    for (int step = 0; step < 6; ++step) {
      std::vector<StepItem> items;
      for (size_t i = 0; i < 3; ++i)
        items.push_back(StepItem{&tables[i], {&next[i], 1}, tables[i].tokens, true, true});
      if (step == 2) items.push_back(StepItem{&tables[3], late, 0, true});
      std::vector<float> logits(items.size() * kVocab);
      ex.forward(items, logits);
      all.insert(all.end(), logits.begin(), logits.end());
      for (size_t i = 0; i < 3; ++i) next[i] = argmax(std::span<const float>(logits).subspan(i * kVocab, kVocab));
    }
    for (auto& t : tables) ex.kv_cache().release(t);
    return all;
  };
  const auto a = run(dual), b = run(single);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
}

TEST_F(HybridExecutorTest, GpuExpertLayersMatchTheCpuExpertsPath) {
  // The same prompt and decode steps with every MoE layer's experts on the GPU and on the CPU:
  // within the engines' tolerance of each other and of the reference; the placement says so.
  HybridExecutorOptions on = options();
  on.max_gpu_expert_layers = -1;
  HybridExecutor gpu(*store_, *pool_, on);
  auto cpu = make_executor();
  EXPECT_EQ(gpu.placement().gpu_expert_layers, 2);  // tiny: 3 layers, the first dense
  EXPECT_EQ(gpu.placement().cpu_expert_bytes, 0u);
  EXPECT_EQ(cpu->placement().gpu_expert_layers, 0);
  std::vector<int32_t> seq = random_tokens(9, 21);
  BlockTable ta, tb;
  ASSERT_TRUE(gpu.kv_cache().reserve(ta, 9 + 8));
  ASSERT_TRUE(cpu->kv_cache().reserve(tb, 9 + 8));
  std::vector<float> la(kVocab), lb(kVocab);
  std::vector<double> errors;
  for (int step = 0; step < 8; ++step) {
    const size_t fed = step == 0 ? 0 : seq.size() - 1;
    StepItem ia{&ta, std::span<const int32_t>(seq).subspan(fed), static_cast<int64_t>(fed), true, step > 0};
    StepItem ib{&tb, std::span<const int32_t>(seq).subspan(fed), static_cast<int64_t>(fed), true, step > 0};
    gpu.forward({&ia, 1}, la);
    cpu->forward({&ib, 1}, lb);
    std::vector<int64_t> t(seq.begin(), seq.end());
    const auto all = reference_->forward(t, reference::MlaForm::kAbsorbed);
    const auto ref = std::span<const float>(all).last(kVocab);
    errors.push_back(rel_error(la, ref));
    EXPECT_LT(rel_error(la, ref), kFlipBound) << "step " << step;
    EXPECT_LT(rel_error(la, lb), kFlipBound) << "step " << step;
    seq.push_back(argmax(ref));
  }
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() / 2], kTolerance);
  // Dual micro-batches over GPU experts: the same bits as one batch.
  HybridExecutorOptions single = on;
  single.dual_microbatch = false;
  HybridExecutor one(*store_, *pool_, single);
  auto decode_pair = [&](HybridExecutor& ex) {
    BlockTable x, y;
    EXPECT_TRUE(ex.kv_cache().reserve(x, 4));
    EXPECT_TRUE(ex.kv_cache().reserve(y, 4));
    const std::vector<int32_t> px = random_tokens(3, 1), py = random_tokens(3, 2);
    StepItem p0{&x, px, 0, false}, p1{&y, py, 0, false};
    ex.forward({&p0, 1}, {});
    ex.forward({&p1, 1}, {});
    const int32_t n0 = 5, n1 = 6;
    std::vector<StepItem> items = {StepItem{&x, {&n0, 1}, 3, true, true}, StepItem{&y, {&n1, 1}, 3, true, true}};
    std::vector<float> out(2 * kVocab);
    ex.forward(items, out);
    ex.kv_cache().release(x);
    ex.kv_cache().release(y);
    return out;
  };
  // Each path twice first: a run-to-run difference within one path (seen in ~2 of 8 runs of the
  // comparison below on the H100) names the path that is not deterministic.
  const auto dual_out = decode_pair(gpu), single_out = decode_pair(one);
  const auto dual_again = decode_pair(gpu), single_again = decode_pair(one);
  for (size_t i = 0; i < dual_out.size(); ++i) ASSERT_EQ(dual_out[i], dual_again[i]) << "dual micro-batches, run to run: logit " << i;
  for (size_t i = 0; i < single_out.size(); ++i) ASSERT_EQ(single_out[i], single_again[i]) << "one batch, run to run: logit " << i;
  for (size_t i = 0; i < dual_out.size(); ++i) ASSERT_EQ(dual_out[i], single_out[i]) << "logit " << i;
}

TEST_F(HybridExecutorTest, MemoryLimitIsHonoured) {
  HybridExecutorOptions o = options();
  o.gpu_memory_limit = size_t{1} << 20;  // 1 MiB holds neither weights nor KV
  try {
    HybridExecutor ex(*store_, *pool_, o);
    FAIL() << "a 1 MiB limit was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("needed"), std::string::npos) << e.what();
  }
  // With room for exactly the resident set and the KV pool plus the step buffers, it runs, and
  // what it placed stays within the limit.
  auto ex = make_executor();
  const GpuPlacement& p = ex->placement();
  EXPECT_GT(p.resident_bytes, 0u);
  EXPECT_GT(p.cpu_expert_bytes, 0u);
  o.gpu_memory_limit = p.resident_bytes + p.kv_bytes + p.step_bytes + (1 << 20);
  HybridExecutor tight(*store_, *pool_, o);
  EXPECT_LE(tight.placement().resident_bytes + tight.placement().kv_bytes + tight.placement().step_bytes,
            *o.gpu_memory_limit);
  // A step larger than the buffers hold must grow them past the limit: an error, not a crash.
  std::vector<int32_t> big = random_tokens(4096, 3);
  BlockTable table;
  if (tight.kv_cache().reserve(table, 4096)) {
    StepItem item{&table, big, 0, true};
    std::vector<float> logits(kVocab);
    EXPECT_THROW(tight.forward({&item, 1}, logits), Error);
    tight.kv_cache().release(table);
  }
}

TEST_F(HybridExecutorTest, NoDeviceMemoryLeftBehind) {
  {
    // First construction and steps: the context settles and the kernels' modules load (lazily,
    // and for the process's life), every row count the rounds below use among them: a kernel's
    // first launch may also grow the driver's local-memory reservation (an H100 run lost 128 MiB
    // to that when the warm-up ran one prompt length only).
    auto ex = make_executor();
    for (size_t n = 1; n <= 8; ++n) {
      auto tokens = random_tokens(n, 99);
      BlockTable table;
      ASSERT_TRUE(ex->kv_cache().reserve(table, static_cast<int64_t>(n) + 1));
      std::vector<float> logits(kVocab);
      StepItem p{&table, tokens, 0, true};
      ex->forward({&p, 1}, logits);
      const int32_t next = argmax(logits);
      StepItem d{&table, {&next, 1}, static_cast<int64_t>(n), true, true};
      ex->forward({&d, 1}, logits);
      ex->kv_cache().release(table);
    }
  }
  // hymoe's own device allocations (every DeviceBuffer of the process): other tests on the same
  // device, run in parallel by ctest, move cudaMemGetInfo's free memory but not this count.
  const size_t live0 = gpu::DeviceBuffer::live_bytes();
  {
    auto ex = make_executor();
    for (int r = 0; r < 100; ++r) {
      auto tokens = random_tokens(3 + r % 5, static_cast<uint32_t>(r));
      BlockTable table;
      ASSERT_TRUE(ex->kv_cache().reserve(table, static_cast<int64_t>(tokens.size()) + 2));
      std::vector<float> logits(kVocab);
      StepItem p{&table, tokens, 0, true};
      ex->forward({&p, 1}, logits);
      const int32_t next = argmax(logits);
      StepItem d{&table, {&next, 1}, static_cast<int64_t>(tokens.size()), true, true};
      ex->forward({&d, 1}, logits);
      ex->kv_cache().release(table);
    }
    EXPECT_EQ(ex->kv_cache().free_blocks(), ex->kv_cache().total_blocks());
  }
  EXPECT_EQ(gpu::DeviceBuffer::live_bytes(), live0) << "device buffers not returned";
}

TEST_F(HybridExecutorTest, ExecutorsShareOneDeviceModel) {
  // Two executors over one GpuModel: one KV pool (a prompt prefilled by one decodes on the other),
  // the weights once (the second executor adds only its step buffers), the same bits as one
  // executor doing both steps.
  const HybridExecutorOptions o = options();
  auto model = std::make_shared<GpuModel>(
      *store_, GpuModelOptions{.kv_cache_bytes = o.kv_cache_bytes, .kv_block_tokens = o.kv_block_tokens});
  const size_t resident = model->budget().used();
  HybridExecutor a(model, *pool_, o);
  const size_t after_a = model->budget().used();
  HybridExecutor b(model, *pool_, o);
  EXPECT_EQ(&a.kv_cache(), &b.kv_cache());
  EXPECT_EQ(model->budget().used() - after_a, after_a - resident) << "the second executor added more than its step buffers";
  const auto prompt = random_tokens(12, 77);
  auto run = [&](HybridExecutor& first, HybridExecutor& second) {
    BlockTable t;
    EXPECT_TRUE(first.kv_cache().reserve(t, 14));
    std::vector<float> logits(kVocab);
    StepItem p{&t, prompt, 0, true};
    first.forward({&p, 1}, logits);
    const int32_t next = argmax(logits);
    StepItem d{&t, {&next, 1}, 12, true, true};
    second.forward({&d, 1}, logits);
    first.kv_cache().release(t);
    return logits;
  };
  const auto same = run(a, a), across = run(a, b);
  for (size_t i = 0; i < same.size(); ++i) ASSERT_EQ(same[i], across[i]) << "logit " << i;
}

// The tuned MLA decode kernel (mla_decode.h) on decode rows needs DeepSeek-V3's attention shapes:
// a tiny model with kv_lora_rank 512, rope 64 and 64 heads (one wgmma head group on sm_90a, the
// tensor-core kernel elsewhere), 64-token cache blocks (its TMA path).
class HybridTunedDecodeTest : public ::testing::Test {
 protected:
  static void deepseek_attention(ModelConfig& c) {
    c.kv_lora_rank = 512;
    c.qk_rope_head_dim = 64;
    c.num_attention_heads = 64;
    c.num_key_value_heads = 64;
  }
  static void SetUpTestSuite() {
    if (gpu::device_count() == 0) return;
    model_ = new test::TinyModel("hymoe_hybrid_tuned", 20261208, kVocab, &deepseek_attention);
  }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override {
    if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static HybridExecutorOptions options(bool tuned) {
    HybridExecutorOptions o;
    o.kv_cache_bytes = 64 << 20;
    o.kv_block_tokens = 64;
    o.max_step_tokens = 64;
    o.max_gpu_expert_layers = 0;
    o.tuned_decode_attention = tuned;
    return o;
  }
  static inline test::TinyModel* model_ = nullptr;
};

TEST_F(HybridTunedDecodeTest, DecodeMatchesReferenceAndTheGenericKernel) {
  // A 70-token prompt, then 90 decode steps (past two 64-token blocks) along the reference's
  // greedy path: each step's logits against the reference's (incremental, with its own cache) and
  // against the generic attention kernel's executor.
  HybridExecutor tuned(*model_->store, *model_->pool, options(true));
  HybridExecutor generic(*model_->store, *model_->pool, options(false));
  std::mt19937 rng(7);
  std::vector<int32_t> seq(70);
  for (auto& t : seq) t = static_cast<int32_t>(rng() % kVocab);
  const int steps = 90;
  BlockTable ta, tb;
  ASSERT_TRUE(tuned.kv_cache().reserve(ta, 70 + steps));
  ASSERT_TRUE(generic.kv_cache().reserve(tb, 70 + steps));
  auto cache = model_->reference->new_cache();
  std::vector<int64_t> prompt(seq.begin(), seq.end());
  std::vector<float> ref = model_->reference->forward(prompt, 0, cache, reference::MlaForm::kAbsorbed);
  std::vector<float> la(kVocab, NAN), lb(kVocab, NAN);
  StepItem pa{&ta, seq, 0, true}, pb{&tb, seq, 0, true};
  tuned.forward({&pa, 1}, la);
  generic.forward({&pb, 1}, lb);
  // The tuned kernel reads q rounded to BF16 and writes o_lat in BF16 (FlashMLA's convention),
  // where the generic one keeps both FP32: on this random model that moves a few near-tied expert
  // choices (an H100 run: 4 of 90 positions past the flip bound, median 8.3e-3). A wrong
  // block, split or length moves nearly every position; so: the median under kTolerance and at
  // most one position in ten past kFlipBound, against the reference and against the generic path.
  std::vector<double> errors, pairs;
  for (int s = 0; s < steps; ++s) {
    const auto last = std::span<const float>(ref).last(kVocab);
    errors.push_back(rel_error(la, last));
    pairs.push_back(rel_error(la, lb));
    const int32_t next = argmax(last);
    const int64_t pos = static_cast<int64_t>(seq.size());
    seq.push_back(next);
    const int64_t t64 = next;
    ref = model_->reference->forward({&t64, 1}, pos, cache, reference::MlaForm::kAbsorbed);
    StepItem da{&ta, std::span<const int32_t>(seq).last(1), pos, true, true};
    StepItem db{&tb, std::span<const int32_t>(seq).last(1), pos, true, true};
    std::fill(la.begin(), la.end(), NAN);
    tuned.forward({&da, 1}, la);
    generic.forward({&db, 1}, lb);
  }
  auto flips = [](const std::vector<double>& v) { return std::count_if(v.begin(), v.end(), [](double e) { return e >= kFlipBound; }); };
  std::sort(errors.begin(), errors.end());
  std::sort(pairs.begin(), pairs.end());
  std::printf("tuned decode attention, %zu positions: vs reference median %.2e, %td past the flip bound; vs generic "
              "median %.2e, %td past it\n",
              errors.size(), errors[errors.size() / 2], flips(errors), pairs[pairs.size() / 2], flips(pairs));
  EXPECT_LT(errors[errors.size() / 2], kTolerance);
  EXPECT_LT(pairs[pairs.size() / 2], kTolerance);
  EXPECT_LE(flips(errors), steps / 10);
  EXPECT_LE(flips(pairs), steps / 10);
  tuned.kv_cache().release(ta);
  generic.kv_cache().release(tb);
}

TEST_F(HybridTunedDecodeTest, DecodeRowDoesNotDependOnTheBatch) {
  // A decode row (300 cached tokens: several splits) alone, then beside a short decode row and a
  // prompt chunk: the same bits.
  HybridExecutor ex(*model_->store, *model_->pool, options(true));
  std::mt19937 rng(9);
  auto tokens = [&](size_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % kVocab);
    return t;
  };
  const auto pa = tokens(300), pb = tokens(7), pc = tokens(20);
  auto run = [&](bool crowded) {
    BlockTable ta, tb, tc;
    EXPECT_TRUE(ex.kv_cache().reserve(ta, 301));
    EXPECT_TRUE(ex.kv_cache().reserve(tb, 8));
    EXPECT_TRUE(ex.kv_cache().reserve(tc, 20));
    for (size_t at = 0; at < pa.size(); at += 64) {  // the long prompt in chunks
      StepItem chunk{&ta, std::span<const int32_t>(pa).subspan(at, std::min<size_t>(64, pa.size() - at)),
                     static_cast<int64_t>(at), false};
      ex.forward({&chunk, 1}, {});
    }
    StepItem b0{&tb, pb, 0, false};
    ex.forward({&b0, 1}, {});
    const int32_t na = 5, nb = 6;
    StepItem a1{&ta, {&na, 1}, 300, true, true};
    StepItem b1{&tb, {&nb, 1}, 7, true, true};
    StepItem c0{&tc, pc, 0, true};
    std::vector<float> out;
    if (crowded) {
      std::vector<StepItem> items = {b1, c0, a1};
      std::vector<float> three(3 * kVocab);
      ex.forward(items, three);
      // Logits come in item order: a1's is the third row (its decode row is the plan's second).
      out.assign(three.begin() + 2 * kVocab, three.end());
    } else {
      out.resize(kVocab);
      ex.forward({&a1, 1}, out);
    }
    ex.kv_cache().release(ta);
    ex.kv_cache().release(tb);
    ex.kv_cache().release(tc);
    return out;
  };
  const auto alone = run(false), crowded = run(true);
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(alone[i], crowded[i]) << "logit " << i;
}

}  // namespace
}  // namespace hymoe
