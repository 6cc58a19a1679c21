// Prefix caching on the CPU executor and the tiny model: KV blocks a request takes from the
// cache give bitwise the same logits as a cold run of the whole prompt (prompt tokens have one
// kernel path whatever the chunking, so a prompt block's rows do not depend on who computed
// them), through the KvCache alone and through the Scheduler. Blocks that hold generated tokens
// were written by the decode kernels, which sum in another order than a prompt chunk: reusing
// them stays within summation-order distance of a cold run, not bitwise.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <random>

#include "engine_test_util.h"
#include "hymoe/engine/cpu_executor.h"
#include "hymoe/scheduler/scheduler.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

constexpr int64_t kVocab = 2048;
constexpr double kRecomputeTolerance = 5e-3;  // as cpu_executor_test: summation order only

class PrefixCacheCpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new test::TinyModel("hymoe_prefix_cache", 20261210, kVocab); }
  static void TearDownTestSuite() { delete model_; }

  static std::unique_ptr<CpuExecutor> make_executor(size_t kv_bytes = 64 << 20) {
    CpuExecutorOptions o;
    o.kv_cache_bytes = kv_bytes;
    o.kv_block_tokens = 16;
    return std::make_unique<CpuExecutor>(*model_->store, *model_->pool, o);
  }
  static std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::printf("random tokens: %zu, seed %u\n", n, seed);
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % kVocab);
    return t;
  }
  static inline test::TinyModel* model_ = nullptr;
};

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

TEST_F(PrefixCacheCpuTest, CachedBlocksGiveBitwiseTheLogitsOfAColdRun) {
  auto ex = make_executor();
  KvCache& kv = ex->kv_cache();
  const auto first = random_tokens(40, 1);
  auto second = std::vector<int32_t>(first.begin(), first.begin() + 37);
  const auto tail = random_tokens(18, 2);
  second.insert(second.end(), tail.begin(), tail.end());  // 55 tokens, the first 37 shared
  std::vector<float> cold(kVocab, NAN), warm(kVocab, NAN), scratch(kVocab, NAN);
  {
    BlockTable t;
    ASSERT_TRUE(kv.reserve(t, 60));
    StepItem one{&t, second, 0, true};
    ex->forward({&one, 1}, cold);
    // Three greedy decode steps for later comparison.
    std::vector<int32_t> gen;
    for (int i = 0; i < 3; ++i) {
      gen.push_back(test::argmax(cold));
      StepItem d{&t, std::span<const int32_t>(gen).last(1), t.tokens, true, true};
      ex->forward({&d, 1}, cold);
    }
    kv.release(t);
  }
  // The first prompt, published; the second takes its two full blocks and computes the rest.
  BlockTable a;
  ASSERT_TRUE(kv.reserve(a, 40));
  StepItem pa{&a, first, 0, true};
  ex->forward({&pa, 1}, scratch);
  kv.publish(a, first);
  EXPECT_EQ(a.shared, 2);
  BlockTable b;
  EXPECT_EQ(kv.take_prefix(b, second, 54), 32);
  EXPECT_EQ(b.blocks[1], a.blocks[1]);
  ASSERT_TRUE(kv.reserve(b, 60));
  StepItem rest{&b, std::span<const int32_t>(second).subspan(32), 32, true};
  ex->forward({&rest, 1}, warm);
  std::vector<int32_t> gen;
  for (int i = 0; i < 3; ++i) {
    gen.push_back(test::argmax(warm));
    StepItem d{&b, std::span<const int32_t>(gen).last(1), b.tokens, true, true};
    ex->forward({&d, 1}, warm);
  }
  EXPECT_TRUE(same_bits(warm, cold)) << "after the prompt and 3 decode steps; rel error "
                                     << test::rel_error(warm, cold);
  kv.release(a);
  kv.release(b);
  EXPECT_EQ(kv.free_blocks(), kv.total_blocks());
}

// Forwards to the CPU executor and keeps every logits row it returns, in order.
class RecordingExecutor final : public Executor {
 public:
  explicit RecordingExecutor(Executor& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  KvCache& kv_cache() override { return inner_.kv_cache(); }
  const char* name() const override { return "recording"; }
  void forward(std::span<const StepItem> items, std::span<float> logits) override {
    inner_.forward(items, logits);
    std::lock_guard lock(mutex);
    rows.emplace_back(logits.begin(), logits.end());
  }
  std::mutex mutex;
  std::vector<std::vector<float>> rows;

 private:
  Executor& inner_;
};

struct Turn {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // per step of this request
  int64_t cached = -1;
};

// One request at a time, greedy; returns its output, logits rows and cached count.
Turn run_one(Scheduler& s, RecordingExecutor& rec, const std::vector<int32_t>& prompt, int max_tokens) {
  {
    std::lock_guard lock(rec.mutex);
    rec.rows.clear();
  }
  auto turn = std::make_shared<Turn>();
  std::promise<void> done;
  GenerationRequest r;
  r.id = "r";
  r.prompt = prompt;
  r.sampling.temperature = 0.0;
  r.sampling.max_tokens = max_tokens;
  r.callbacks.on_admitted = [turn](int64_t n) { turn->cached = n; };
  r.callbacks.on_token = [turn](const TokenOutput& t) {
    turn->tokens.push_back(t.token);
    return true;
  };
  r.callbacks.on_finish = [&done](FinishReason, const std::string&) { done.set_value(); };
  s.submit(std::move(r));
  done.get_future().wait();
  std::lock_guard lock(rec.mutex);
  for (auto& row : rec.rows)
    if (!row.empty()) turn->logits.push_back(row);
  return *turn;
}

// Three turns of a chat (each re-sends the history and the output), with the prefix cache on and
// off: the turns' outputs are the same; every logits row is bitwise the same where only prompt
// blocks were taken, and within summation order where generated ones were too.
TEST_F(PrefixCacheCpuTest, SchedulerTurnsMatchColdRuns) {
  Turn turns[2][3];
  for (int on = 0; on < 2; ++on) {
    auto ex = make_executor();
    RecordingExecutor rec(*ex);
    SchedulerConfig cfg;
    cfg.prefix_cache = on == 1;
    cfg.max_prefill_chunk = 24;  // prompts in several chunks, cold and warm
    Scheduler s(rec, -1, cfg);
    std::vector<int32_t> history = random_tokens(37, 5);
    // Turn 1 repeats turn 0's prompt with more after it: only prompt blocks are taken.
    // Turn 2 re-sends turn 1's output too: generated blocks are taken as well.
    for (int t = 0; t < 3; ++t) {
      std::vector<int32_t> prompt = history;
      if (t == 1) {
        const auto more = random_tokens(5, 6);
        prompt.insert(prompt.end(), more.begin(), more.end());
      }
      turns[on][t] = run_one(s, rec, prompt, 20);
      if (t >= 1) {
        history = prompt;
        history.insert(history.end(), turns[on][t].tokens.begin(), turns[on][t].tokens.end());
        const auto more = random_tokens(4, 7 + static_cast<uint32_t>(t));
        history.insert(history.end(), more.begin(), more.end());
      }
    }
    EXPECT_TRUE(s.wait_idle(5));
    EXPECT_EQ(ex->kv_cache().free_blocks(), ex->kv_cache().total_blocks());
    const SchedulerStats st = s.stats();
    std::printf("prefix cache %s: cached %lld / %lld / %lld tokens; queries %lld, hits %lld\n", on ? "on" : "off",
                static_cast<long long>(turns[on][0].cached), static_cast<long long>(turns[on][1].cached),
                static_cast<long long>(turns[on][2].cached), static_cast<long long>(st.prefix_cache_queries),
                static_cast<long long>(st.prefix_cache_hits));
  }
  EXPECT_EQ(turns[1][0].cached, 0);
  EXPECT_EQ(turns[1][1].cached, 32);   // turn 0's two full prompt blocks
  EXPECT_GT(turns[1][2].cached, 42);   // into turn 1's generated tokens
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(turns[0][t].cached, 0);
    ASSERT_EQ(turns[0][t].logits.size(), turns[1][t].logits.size()) << "turn " << t;
    for (size_t i = 0; i < turns[0][t].logits.size(); ++i) {
      if (t < 2) {
        EXPECT_TRUE(same_bits(turns[0][t].logits[i], turns[1][t].logits[i])) << "turn " << t << " step " << i;
      } else {
        EXPECT_LT(test::rel_error(turns[1][t].logits[i], turns[0][t].logits[i]), kRecomputeTolerance)
            << "turn " << t << " step " << i;
      }
    }
  }
  EXPECT_EQ(turns[0][1].tokens, turns[1][1].tokens);
}

}  // namespace
}  // namespace hymoe
