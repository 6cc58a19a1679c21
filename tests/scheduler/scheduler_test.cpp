// Scheduler contract tests. The executor here is a small deterministic language model over a
// 64-token vocabulary: the next token is a function of the previous token and its position, so
// every request's correct output is known. It verifies the executor contract on every call (KV
// reserved, positions contiguous, earlier KV rows intact after preemption and recompute).
#include "hymoe/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "hymoe/common/error.h"

namespace hymoe {
namespace {

constexpr int32_t kVocab = 64;
constexpr int32_t kEos = 1;

int32_t next_token(int32_t prev, int64_t pos) {
  int32_t t = static_cast<int32_t>((prev * 7 + pos * 3 + 5) % kVocab);
  return t == kEos ? 2 : t;  // never EOS unless asked
}

// The KV-dependent toy's next token: every earlier token at its position counts.
int32_t next_from_history(const std::vector<int32_t>& seq) {
  int64_t h = 0;
  for (size_t p = 0; p < seq.size(); ++p) h += (seq[p] + 1) * static_cast<int64_t>(2 * p + 1);
  return static_cast<int32_t>(h % 61) + 2;  // never EOS
}

class ToyExecutor final : public Executor {
 public:
  ToyExecutor(int64_t kv_blocks, int64_t block_tokens)
      : kv_(KvCacheShape{.layers = 1, .kv_lora_rank = 2, .rope_dim = 0, .block_tokens = block_tokens},
            KvCacheShape{.layers = 1, .kv_lora_rank = 2, .rope_dim = 0, .block_tokens = block_tokens}.bytes_per_block() *
                static_cast<size_t>(kv_blocks)) {
    config_.vocab_size = kVocab;
    config_.max_position_embeddings = 256;
  }
  const ModelConfig& config() const override { return config_; }
  KvCache& kv_cache() override { return kv_; }
  const char* name() const override { return "toy"; }

  void forward(std::span<const StepItem> items, std::span<float> logits) override {
    gate.wait();  // tests hold the first step until every request is queued
    ++steps;
    if (on_step) on_step(items);
    if (fail_next.exchange(false)) throw Error(ErrorKind::kInternal, "injected failure");
    compute(items, logits, true);
  }

  // The model itself (KV rows written and checked, logits), with the step counters when `count`
  // (LongToy calls it from the long path's thread without them).
  void compute(std::span<const StepItem> items, std::span<float> logits, bool count) {
    size_t row = 0;
    for (const StepItem& it : items) {
      EXPECT_EQ(it.start, it.table->tokens);
      const int64_t end = it.start + static_cast<int64_t>(it.tokens.size());
      EXPECT_GE(static_cast<int64_t>(it.table->blocks.size()) * kv_.shape().block_tokens, end);
      // Earlier rows must hold the tokens written then (row = [token, position]).
      for (int64_t p = 0; p < it.start; ++p) {
        EXPECT_EQ(kv_.row(*it.table, 0, p)[1], static_cast<uint16_t>(p));
      }
      for (size_t k = 0; k < it.tokens.size(); ++k) {
        uint16_t* r = kv_.row(*it.table, 0, it.start + static_cast<int64_t>(k));
        r[0] = static_cast<uint16_t>(it.tokens[k]);
        r[1] = static_cast<uint16_t>(it.start + static_cast<int64_t>(k));
      }
      it.table->tokens = end;
      if (count) max_batch = std::max<int64_t>(max_batch, static_cast<int64_t>(items.size()));
      if (count && it.tokens.size() > 1) {
        const bool with_decode = std::any_of(items.begin(), items.end(), [](const StepItem& o) { return o.tokens.size() == 1; });
        int64_t& m = with_decode ? max_prefill_beside_decode : max_prefill_alone;
        m = std::max<int64_t>(m, static_cast<int64_t>(it.tokens.size()));
      }
      if (count && !it.decode) prompt_rows += static_cast<int64_t>(it.tokens.size());
      if (!it.want_logits) continue;
      float* out = logits.data() + row * kVocab;
      ++row;
      const int32_t last = it.tokens.back();
      int32_t want = next_token(last, end - 1);
      if (kv_dependent) {  // a function of every token in the KV rows: a wrong cached block shows
        std::vector<int32_t> seen;
        for (int64_t p = 0; p < end; ++p) seen.push_back(static_cast<int32_t>(kv_.row(*it.table, 0, p)[0]));
        want = next_from_history(seen);
      }
      if (eos_after_token >= 0 && last == eos_after_token) want = kEos;
      for (int32_t v = 0; v < kVocab; ++v) out[v] = v == want ? 10.0f : static_cast<float>(v % 3) * 0.1f;
    }
    EXPECT_EQ(row * kVocab, logits.size());
  }

  std::shared_future<void> gate = [] {
    std::promise<void> p;
    p.set_value();
    return p.get_future().share();
  }();
  std::atomic<int64_t> steps{0};
  std::atomic<bool> fail_next{false};
  int64_t max_batch = 0;
  int64_t max_prefill_beside_decode = 0;
  int64_t max_prefill_alone = 0;
  int32_t eos_after_token = -1;
  bool kv_dependent = false;  // the next token from all KV rows (next_from_history)
  std::atomic<int64_t> prompt_rows{0};  // prompt (non-decode) tokens computed
  std::function<void(std::span<const StepItem>)> on_step;

 private:
  ModelConfig config_;
  KvCache kv_;
};

std::vector<int32_t> expected(const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  int32_t prev = prompt.back();
  int64_t pos = static_cast<int64_t>(prompt.size()) - 1;
  for (int i = 0; i < n; ++i) {
    prev = next_token(prev, pos++);
    out.push_back(prev);
  }
  return out;
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kError;
  std::string error;
};

// Submits and returns a future of the outcome.
std::future<Result> run(Scheduler& s, std::string id, std::vector<int32_t> prompt, int max_tokens,
                        std::function<bool(const TokenOutput&)> extra = nullptr) {
  auto result = std::make_shared<Result>();
  auto promise = std::make_shared<std::promise<Result>>();
  GenerationRequest r;
  r.id = std::move(id);
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0;
  r.sampling.max_tokens = max_tokens;
  r.callbacks.on_token = [result, extra](const TokenOutput& t) {
    result->tokens.push_back(t.token);
    return extra ? extra(t) : true;
  };
  r.callbacks.on_finish = [result, promise](FinishReason reason, const std::string& error) {
    result->reason = reason;
    result->error = error;
    promise->set_value(*result);
  };
  s.submit(std::move(r));
  return promise->get_future();
}

TEST(Scheduler, GreedyGenerationEndsAtMaxTokens) {
  ToyExecutor ex(64, 4);
  Scheduler s(ex, kEos, {});
  std::vector<int32_t> prompt = {3, 9, 27, 4, 5};
  auto r = run(s, "a", prompt, 12).get();
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens, expected(prompt, 12));
  EXPECT_TRUE(s.wait_idle(5));
  EXPECT_EQ(ex.kv_cache().free_blocks(), 64);
}

// TokenOutput::last marks exactly the token after which the length limit ends the request.
TEST(Scheduler, MarksTheLastTokenOfALengthFinish) {
  ToyExecutor ex(64, 4);
  Scheduler s(ex, kEos, {});
  std::vector<int64_t> last_at;
  auto r = run(s, "a", {3, 9, 27}, 7, [&last_at](const TokenOutput& t) {
             if (t.last) last_at.push_back(t.index);
             return true;
           }).get();
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(last_at, std::vector<int64_t>{6});
  // A callback stop or EOS ends a request without a marked token.
  last_at.clear();
  auto c = run(s, "cb", {7, 7}, 100, [&last_at](const TokenOutput& t) {
             if (t.last) last_at.push_back(t.index);
             return t.index < 2;
           }).get();
  EXPECT_EQ(c.reason, FinishReason::kStop);
  EXPECT_TRUE(last_at.empty());
}

TEST(Scheduler, EosAndCallbackStop) {
  ToyExecutor ex(64, 4);
  std::vector<int32_t> prompt = {3, 9};
  auto want = expected(prompt, 8);
  ex.eos_after_token = want[4];
  Scheduler s(ex, kEos, {});
  auto r = run(s, "eos", prompt, 100).get();
  EXPECT_EQ(r.reason, FinishReason::kStop);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(want.begin(), want.begin() + 5));
  auto c = run(s, "cb", {7, 7}, 100, [](const TokenOutput& t) { return t.index < 2; }).get();
  EXPECT_EQ(c.reason, FinishReason::kStop);
  EXPECT_EQ(c.tokens.size(), 3u);
}

TEST(Scheduler, ManyConcurrentRequestsBatchAndStayCorrect) {
  ToyExecutor ex(256, 4);
  std::promise<void> open;
  ex.gate = open.get_future().share();
  SchedulerConfig cfg;
  cfg.max_running = 4;
  cfg.max_prefill_chunk = 8;  // long prompts take several chunks
  Scheduler s(ex, kEos, cfg);
  std::vector<std::future<Result>> futures;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < 1 + (i * 5) % 23; ++k) p.push_back((i * 13 + k * 3) % kVocab);
    prompts.push_back(p);
    futures.push_back(run(s, "r" + std::to_string(i), p, 10 + i % 7));
  }
  open.set_value();
  for (int i = 0; i < 20; ++i) {
    auto r = futures[static_cast<size_t>(i)].get();
    EXPECT_EQ(r.reason, FinishReason::kLength) << i;
    EXPECT_EQ(r.tokens, expected(prompts[static_cast<size_t>(i)], 10 + i % 7)) << i;
  }
  EXPECT_GT(ex.max_batch, 1);
  EXPECT_LE(ex.max_batch, 4);
  EXPECT_TRUE(s.wait_idle(5));
  EXPECT_EQ(ex.kv_cache().free_blocks(), 256);
}

// max_decode_batch: no step takes more decodes than the bound, every request still gets its
// exact tokens, and a decoding sequence waits at most ceil(decoding / bound) steps for its next
// token (the ones served longest ago go first); the prefill chunks beside do not count.
TEST(Scheduler, DecodeBatchBoundServesEveryDecodeInTurn) {
  ToyExecutor ex(256, 4);
  std::promise<void> open;
  ex.gate = open.get_future().share();
  std::mutex mu;
  std::map<const BlockTable*, std::vector<int64_t>> decode_steps;  // per sequence: the steps it decoded in
  int64_t step = 0, max_decodes = 0;
  ex.on_step = [&](std::span<const StepItem> items) {
    std::lock_guard lock(mu);
    ++step;
    int64_t n = 0;
    for (const StepItem& it : items) {
      if (!it.decode) continue;
      ++n;
      decode_steps[it.table].push_back(step);
    }
    max_decodes = std::max(max_decodes, n);
  };
  SchedulerConfig cfg;
  cfg.max_running = 8;
  cfg.max_decode_batch = 2;
  Scheduler s(ex, kEos, cfg);
  std::vector<std::future<Result>> futures;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) {
    prompts.push_back({(i * 7 + 1) % kVocab, (i * 11 + 2) % kVocab, (i * 3 + 5) % kVocab});
    futures.push_back(run(s, "d" + std::to_string(i), prompts.back(), 12 + i));
  }
  open.set_value();
  for (int i = 0; i < 5; ++i) {
    auto r = futures[static_cast<size_t>(i)].get();
    EXPECT_EQ(r.reason, FinishReason::kLength) << i;
    EXPECT_EQ(r.tokens, expected(prompts[static_cast<size_t>(i)], 12 + i)) << i;
  }
  EXPECT_TRUE(s.wait_idle(5));
  std::lock_guard lock(mu);
  EXPECT_EQ(max_decodes, 2);
  ASSERT_EQ(decode_steps.size(), 5u);
  for (const auto& [table, steps] : decode_steps) {
    for (size_t k = 1; k < steps.size(); ++k) EXPECT_LE(steps[k] - steps[k - 1], 3) << "a decode waited too long";
  }
  SchedulerConfig bad;
  bad.max_decode_batch = -1;
  EXPECT_THROW(Scheduler(ex, kEos, bad), Error);
}

TEST(Scheduler, PreemptsUnderKvPressureAndRecomputes) {
  ToyExecutor ex(10, 4);  // 40 tokens of KV for 4 sequences wanting ~30 each
  std::promise<void> open;
  ex.gate = open.get_future().share();
  SchedulerConfig cfg;
  cfg.max_running = 4;
  Scheduler s(ex, kEos, cfg);
  std::vector<std::future<Result>> futures;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back({i + 3, i + 4, i + 5, i + 6, i + 7, i + 8});
    futures.push_back(run(s, "p" + std::to_string(i), prompts.back(), 24));
  }
  open.set_value();
  for (int i = 0; i < 4; ++i) {
    auto r = futures[static_cast<size_t>(i)].get();
    EXPECT_EQ(r.reason, FinishReason::kLength);
    EXPECT_EQ(r.tokens, expected(prompts[static_cast<size_t>(i)], 24)) << i;
  }
  EXPECT_GT(s.stats().preemptions, 0);
  EXPECT_TRUE(s.wait_idle(5));
  EXPECT_EQ(ex.kv_cache().free_blocks(), 10);
}

TEST(Scheduler, CancelFreesKvAndOthersContinue) {
  ToyExecutor ex(64, 4);
  Scheduler s(ex, kEos, {});
  std::promise<void> started;
  std::atomic<bool> once{false};
  auto victim = run(s, "victim", {5, 6, 7}, 200, [&](const TokenOutput&) {
    if (!once.exchange(true)) started.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return true;
  });
  started.get_future().wait();
  s.cancel("victim");
  auto r = victim.get();
  EXPECT_EQ(r.reason, FinishReason::kAbort);
  EXPECT_LT(r.tokens.size(), 200u);
  auto other = run(s, "other", {8, 9}, 5).get();
  EXPECT_EQ(other.tokens, expected({8, 9}, 5));
  EXPECT_TRUE(s.wait_idle(5));
  EXPECT_EQ(ex.kv_cache().free_blocks(), 64);
  s.cancel("no-such-request");  // harmless
}

TEST(Scheduler, ExecutorFailureFailsTheStepOnly) {
  ToyExecutor ex(64, 4);
  Scheduler s(ex, kEos, {});
  ex.fail_next = true;
  auto bad = run(s, "bad", {4, 5}, 5).get();
  EXPECT_EQ(bad.reason, FinishReason::kError);
  EXPECT_NE(bad.error.find("injected"), std::string::npos);
  auto good = run(s, "good", {4, 5}, 5).get();
  EXPECT_EQ(good.reason, FinishReason::kLength);
  EXPECT_EQ(good.tokens, expected({4, 5}, 5));
}

TEST(Scheduler, RejectsBadRequests) {
  ToyExecutor ex(8, 4);  // 32 tokens of KV
  SchedulerConfig cfg;
  cfg.max_context = 100;
  Scheduler s(ex, kEos, cfg);
  auto submit = [&](std::vector<int32_t> prompt, int max_tokens) {
    GenerationRequest r;
    r.id = "x";
    r.prompt = std::move(prompt);
    r.sampling.max_tokens = max_tokens;
    r.callbacks.on_finish = [](FinishReason, const std::string&) {};
    s.submit(std::move(r));
  };
  auto kind_of = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;
  };
  EXPECT_EQ(kind_of([&] { submit({}, 1); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { submit({kVocab}, 1); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { submit({-1}, 1); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { submit(std::vector<int32_t>(100, 3), 1); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { submit(std::vector<int32_t>(50, 3), 60); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of([&] { submit(std::vector<int32_t>(40, 3), 1); }), ErrorKind::kResourceExhausted);
  s.stop_accepting();
  EXPECT_EQ(kind_of([&] { submit({3}, 1); }), ErrorKind::kUnavailable);
}

}  // namespace
}  // namespace hymoe

namespace hymoe {
namespace {

TEST(Scheduler, NeverSamplesPastTheTokenizerVocabulary) {
  ToyExecutor ex(64, 4);
  SchedulerConfig cfg;
  cfg.sample_vocab = 32;  // the toy model prefers ids up to 63
  Scheduler s(ex, kEos, cfg);
  auto r = run(s, "pad", {40, 50, 60}, 40).get();
  ASSERT_EQ(r.tokens.size(), 40u);
  for (int32_t t : r.tokens) EXPECT_LT(t, 32);
}

}  // namespace
}  // namespace hymoe

namespace hymoe {
namespace {

// logit_bias travels with the request to the sampler, and only over ids that can be sampled.
TEST(Scheduler, LogitBiasReachesTheSamplerWithinTheSampledVocabulary) {
  ToyExecutor ex(64, 4);
  SchedulerConfig cfg;
  cfg.sample_vocab = 32;
  Scheduler s(ex, kEos, cfg);
  auto submit = [&](std::vector<std::pair<int32_t, float>> bias, std::shared_ptr<std::vector<int32_t>> out,
                    std::shared_ptr<std::promise<void>> done) {
    GenerationRequest r;
    r.id = "bias";
    r.prompt = {40, 50, 60};
    r.sampling.temperature = 0.0;
    r.sampling.max_tokens = 10;
    r.sampling.logit_bias = std::move(bias);
    r.callbacks.on_token = [out](const TokenOutput& t) {
      out->push_back(t.token);
      return true;
    };
    r.callbacks.on_finish = [done](FinishReason, const std::string&) { done->set_value(); };
    s.submit(std::move(r));
  };
  auto out = std::make_shared<std::vector<int32_t>>();
  auto done = std::make_shared<std::promise<void>>();
  submit({{7, 100.0f}, {31, -3.0f}}, out, done);
  done->get_future().wait();
  EXPECT_EQ(*out, std::vector<int32_t>(10, 7));
  auto refused = [&](std::vector<std::pair<int32_t, float>> bias) {
    try {
      submit(std::move(bias), out, done);
    } catch (const Error& e) {
      return e.kind() == ErrorKind::kInvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(refused({{32, 1.0f}}));              // a padding id: never sampled
  EXPECT_TRUE(refused({{-1, 1.0f}}));
  EXPECT_TRUE(refused({{9, 1.0f}, {3, 1.0f}}));    // not sorted
  EXPECT_TRUE(refused({{3, 1.0f}, {3, 2.0f}}));    // repeated
}

TEST(Scheduler, WaitIdleCoversJustSubmittedRequests) {
  ToyExecutor ex(64, 4);
  std::promise<void> open;
  ex.gate = open.get_future().share();
  Scheduler s(ex, kEos, {});
  auto r = run(s, "busy", {3, 4}, 5);
  EXPECT_FALSE(s.wait_idle(0.2));  // queued or running, not idle
  open.set_value();
  EXPECT_TRUE(s.wait_idle(5));
  EXPECT_EQ(r.get().reason, FinishReason::kLength);
}

}  // namespace
}  // namespace hymoe

namespace hymoe {
namespace {

TEST(Scheduler, PrefillIsCutFinerBesideDecodes) {
  ToyExecutor ex(256, 4);
  SchedulerConfig cfg;
  cfg.max_prefill_chunk = 100;
  cfg.decode_prefill_chunk = 16;
  Scheduler s(ex, kEos, cfg);
  std::vector<int32_t> long_prompt(150, 7);
  auto first = run(s, "alone", long_prompt, 2).get();  // nothing decodes: 100-token chunks
  EXPECT_EQ(ex.max_prefill_alone, 100);
  std::promise<void> decoding;
  std::atomic<bool> once{false};
  // The decoder takes 2 ms per token (in its callback), so the prefill arrives while it decodes.
  auto d = run(s, "decoder", {3, 4}, 100, [&](const TokenOutput&) {
    if (!once.exchange(true)) decoding.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return true;
  });
  decoding.get_future().wait();
  auto p = run(s, "prefill", long_prompt, 2).get();
  EXPECT_EQ(p.tokens, expected(long_prompt, 2));
  EXPECT_LE(ex.max_prefill_beside_decode, 16);
  EXPECT_GT(ex.max_prefill_beside_decode, 0);
  EXPECT_EQ(d.get().reason, FinishReason::kLength);
  (void)first;
}

}  // namespace
}  // namespace hymoe

namespace hymoe {
namespace {

// A real constraint of its own kind: tokens strictly ascending, the end allowed from `end_after`
// tokens on. Counts its calls so the test sees the scheduler drive it.
class Ascending final : public TokenConstraint {
 public:
  explicit Ascending(int32_t end_after) : end_after_(end_after) {}
  void mask(std::span<float> logits) override {
    for (size_t t = 0; t < logits.size(); ++t) {
      const bool ok = static_cast<int32_t>(t) == kEos ? count_ >= end_after_ : static_cast<int32_t>(t) > last_;
      if (!ok) logits[t] = -std::numeric_limits<float>::infinity();
    }
  }
  bool accept(int32_t t) override {
    if (t == kEos) return count_ >= end_after_;
    if (t <= last_) return false;
    last_ = t;
    ++count_;
    return true;
  }

 private:
  int32_t end_after_;
  int32_t last_ = kEos;
  int32_t count_ = 0;
};

struct AscendingFactory final : TokenConstraintFactory {
  explicit AscendingFactory(int32_t n) : end_after(n) {}
  std::unique_ptr<TokenConstraint> start() const override { return std::make_unique<Ascending>(end_after); }
  int32_t end_after;
};

// The constraint masks each step before sampling, each sequence with its own state, greedy and
// sampled alike; when nothing it allows is left, the request fails instead of breaking the rule.
TEST(Scheduler, ConstraintMasksEveryStepPerSequence) {
  ToyExecutor ex(64, 4);
  Scheduler s(ex, kEos, {});
  auto submit = [&](const std::string& id, double temperature, int32_t end_after, int max_tokens,
                    std::shared_ptr<Result> result, std::shared_ptr<std::promise<void>> done) {
    GenerationRequest r;
    r.id = id;
    r.prompt = {3, 9, 27};
    r.sampling.temperature = temperature;
    r.sampling.seed = 7;
    r.sampling.max_tokens = max_tokens;
    r.sampling.constraint = std::make_shared<AscendingFactory>(end_after);
    r.callbacks.on_token = [result](const TokenOutput& t) {
      result->tokens.push_back(t.token);
      return true;
    };
    r.callbacks.on_finish = [result, done](FinishReason reason, const std::string& error) {
      result->reason = reason;
      result->error = error;
      done->set_value();
    };
    s.submit(std::move(r));
  };
  struct Run {
    std::shared_ptr<Result> result = std::make_shared<Result>();
    std::shared_ptr<std::promise<void>> done = std::make_shared<std::promise<void>>();
  };
  Run greedy, sampled, ends, stuck;
  submit("greedy", 0.0, 0, 20, greedy.result, greedy.done);
  submit("sampled", 1.0, 0, 20, sampled.result, sampled.done);
  submit("ends", 0.0, 3, 100, ends.result, ends.done);
  submit("stuck", 0.0, 1000, 200, stuck.result, stuck.done);
  for (Run* r : {&greedy, &sampled, &ends, &stuck}) {
    r->done->get_future().wait();
    EXPECT_TRUE(std::is_sorted(r->result->tokens.begin(), r->result->tokens.end(), std::less_equal<int32_t>()));
    EXPECT_TRUE(std::adjacent_find(r->result->tokens.begin(), r->result->tokens.end()) == r->result->tokens.end());
    EXPECT_TRUE(std::find(r->result->tokens.begin(), r->result->tokens.end(), kEos) == r->result->tokens.end());
  }
  // The toy prefers its next_token; the rule overrules it.
  EXPECT_NE(greedy.result->tokens, expected({3, 9, 27}, static_cast<int>(greedy.result->tokens.size())));
  // With the end allowed at once, greedy on the toy's logits goes on ascending until it is the
  // best allowed token or the ids run out.
  EXPECT_EQ(ends.result->reason, FinishReason::kStop);
  EXPECT_GE(ends.result->tokens.size(), 3u);
  // Ids run out before the end is allowed: an error, not a token the rule refuses.
  EXPECT_EQ(stuck.result->reason, FinishReason::kError);
  EXPECT_NE(stuck.result->error.find("constrained decoding"), std::string::npos) << stuck.result->error;
  EXPECT_LE(stuck.result->tokens.size(), static_cast<size_t>(kVocab - 2));

  // ignore_eos would take the end out of the constraint's hands.
  GenerationRequest bad;
  bad.id = "bad";
  bad.prompt = {3};
  bad.sampling.ignore_eos = true;
  bad.sampling.constraint = std::make_shared<AscendingFactory>(0);
  EXPECT_THROW(s.submit(std::move(bad)), Error);
}

}  // namespace
}  // namespace hymoe

namespace hymoe {
namespace {

std::vector<int32_t> expected_from_history(std::vector<int32_t> seq, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(next_from_history(seq));
    seq.push_back(out.back());
  }
  return out;
}

// Submits a greedy request that records what on_admitted reports.
std::future<Result> run_cached(Scheduler& s, std::string id, std::vector<int32_t> prompt, int max_tokens,
                               std::shared_ptr<std::atomic<int64_t>> cached) {
  auto result = std::make_shared<Result>();
  auto promise = std::make_shared<std::promise<Result>>();
  GenerationRequest r;
  r.id = std::move(id);
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0;
  r.sampling.max_tokens = max_tokens;
  r.callbacks.on_admitted = [cached](int64_t n) { *cached = n; };
  r.callbacks.on_token = [result](const TokenOutput& t) {
    result->tokens.push_back(t.token);
    return true;
  };
  r.callbacks.on_finish = [result, promise](FinishReason reason, const std::string& error) {
    result->reason = reason;
    result->error = error;
    promise->set_value(*result);
  };
  s.submit(std::move(r));
  return promise->get_future();
}

void expect_all_released(KvCache& kv) {
  EXPECT_EQ(kv.free_blocks(), kv.total_blocks());
  for (int32_t b = 0; b < kv.total_blocks(); ++b) EXPECT_EQ(kv.references(b), 0) << "block " << b;
}

// A multi-turn conversation: each turn re-sends the history (prompt + the model's output) and
// more. The toy's output depends on every KV row, so a wrong shared block would show.
TEST(SchedulerPrefixCache, LaterTurnsTakeTheHistoryFromTheCacheWithTheSameOutput) {
  for (bool on : {true, false}) {
    ToyExecutor ex(64, 4);
    ex.kv_dependent = true;
    SchedulerConfig cfg;
    cfg.prefix_cache = on;
    Scheduler s(ex, kEos, cfg);
    std::vector<int32_t> history = {3, 9, 27, 4, 5, 6, 7, 8, 10, 11};
    int64_t cached_total = 0;
    for (int turn = 0; turn < 4; ++turn) {
      auto cached = std::make_shared<std::atomic<int64_t>>(-1);
      auto r = run_cached(s, "t" + std::to_string(turn), history, 6, cached).get();
      ASSERT_EQ(r.reason, FinishReason::kLength);
      EXPECT_EQ(r.tokens, expected_from_history(history, 6)) << "turn " << turn << (on ? " cached" : " cold");
      if (!on || turn == 0) {
        EXPECT_EQ(*cached, 0) << turn;
      } else {
        // The whole history up to the last full block of the previous turn's written KV
        // (its prompt and all but the last generated token).
        const int64_t written = static_cast<int64_t>(history.size()) - 3 - 1;
        EXPECT_EQ(*cached, written / 4 * 4) << turn;
      }
      cached_total += *cached;
      history.insert(history.end(), r.tokens.begin(), r.tokens.end());
      history.insert(history.end(), {12, 13, 14});
    }
    EXPECT_TRUE(s.wait_idle(5));
    expect_all_released(ex.kv_cache());
    const SchedulerStats st = s.stats();
    EXPECT_EQ(st.prefix_cache_hits, cached_total);
    EXPECT_EQ(st.prefix_cache_queries > 0, on);
    std::printf("prefix cache %s: %lld prompt rows computed, %lld tokens from the cache\n", on ? "on" : "off",
                static_cast<long long>(ex.prompt_rows.load()), static_cast<long long>(cached_total));
  }
}

// A prompt equal to a cached one recomputes its last token (its logits are the output) and
// nothing else; identical prompts in flight together compute twice (nothing cached yet) and
// stay correct.
TEST(SchedulerPrefixCache, AWholeCachedPromptKeepsItsLastToken) {
  ToyExecutor ex(64, 4);
  ex.kv_dependent = true;
  Scheduler s(ex, kEos, {});
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12};
  auto c0 = std::make_shared<std::atomic<int64_t>>(-1);
  auto first = run_cached(s, "a", prompt, 3, c0).get();
  const int64_t rows = ex.prompt_rows;
  auto c1 = std::make_shared<std::atomic<int64_t>>(-1);
  auto again = run_cached(s, "b", prompt, 3, c1).get();
  EXPECT_EQ(*c1, 4);  // the second block holds the last token: computed again
  EXPECT_EQ(ex.prompt_rows - rows, 4);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.tokens, expected_from_history(prompt, 3));
  std::promise<void> open;
  ex.gate = open.get_future().share();
  std::vector<std::future<Result>> twins;
  std::vector<int32_t> p2 = {1 + 1, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5};
  for (int i = 0; i < 3; ++i) twins.push_back(run_cached(s, "twin" + std::to_string(i), p2, 9, std::make_shared<std::atomic<int64_t>>()));
  open.set_value();
  for (auto& f : twins) EXPECT_EQ(f.get().tokens, expected_from_history(p2, 9));
  EXPECT_TRUE(s.wait_idle(5));
  expect_all_released(ex.kv_cache());
}

// Cancelled while its prompt is half computed: the request's references, on its own blocks
// and on the cached ones it took, all go back.
TEST(SchedulerPrefixCache, CancelMidPrefillReleasesItsReferences) {
  ToyExecutor ex(64, 4);
  SchedulerConfig cfg;
  cfg.max_prefill_chunk = 4;
  Scheduler s(ex, kEos, cfg);
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + i % 50);
  auto c0 = std::make_shared<std::atomic<int64_t>>(-1);
  run_cached(s, "warm", std::vector<int32_t>(prompt.begin(), prompt.begin() + 17), 1, c0).get();
  std::atomic<int> steps{0};
  std::atomic<bool> held_shared{false};
  KvCache& kv = ex.kv_cache();
  ex.on_step = [&](std::span<const StepItem> items) {
    for (const StepItem& it : items)
      if (it.table->shared > 0 && kv.references(it.table->blocks[0]) >= 1) held_shared = true;
    if (++steps == 3) s.cancel("victim");
  };
  auto c1 = std::make_shared<std::atomic<int64_t>>(-1);
  auto r = run_cached(s, "victim", prompt, 5, c1).get();
  EXPECT_EQ(r.reason, FinishReason::kAbort);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(*c1, 16);
  EXPECT_TRUE(held_shared);
  EXPECT_TRUE(s.wait_idle(5));
  expect_all_released(kv);
  EXPECT_GE(kv.cached_blocks(), 4);  // the warm prompt's blocks (and the victim's) stay cached
}

// Under a small KV budget many requests with shared prefixes evict and preempt; every output
// stays what the KV-dependent toy computes from the true history.
TEST(SchedulerPrefixCache, SmallBudgetEvictsOnlyUnheldBlocks) {
  ToyExecutor ex(14, 4);
  ex.kv_dependent = true;
  std::promise<void> open;
  ex.gate = open.get_future().share();
  SchedulerConfig cfg;
  cfg.max_running = 4;
  cfg.max_prefill_chunk = 6;
  Scheduler s(ex, kEos, cfg);
  std::vector<std::future<Result>> futures;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> p = {7, 8, 9, 10, 11, 12, 13, 14};
    p.resize(static_cast<size_t>(2 + (i * 5) % 9));
    for (int k = 0; k < i % 4; ++k) p.push_back(20 + (i * 7 + k) % 30);
    prompts.push_back(p);
    futures.push_back(run_cached(s, "r" + std::to_string(i), p, 8 + i % 5, std::make_shared<std::atomic<int64_t>>()));
  }
  open.set_value();
  for (size_t i = 0; i < futures.size(); ++i) {
    auto r = futures[i].get();
    EXPECT_EQ(r.reason, FinishReason::kLength) << i << " " << r.error;
    EXPECT_EQ(r.tokens, expected_from_history(prompts[i], 8 + static_cast<int>(i) % 5)) << i;
  }
  EXPECT_TRUE(s.wait_idle(5));
  expect_all_released(ex.kv_cache());
  EXPECT_GT(s.stats().prefix_cache_hits, 0);
  EXPECT_GT(ex.kv_cache().evictions(), 0);
}

}  // namespace
}  // namespace hymoe

namespace hymoe {
namespace {

// The long-prompt path: the toy model on a thread of the scheduler's own, over the main toy's KV
// cache. A test can hold its steps (gate) and sees when one has entered.
class LongToy final : public Executor {
 public:
  explicit LongToy(ToyExecutor& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  KvCache& kv_cache() override { return inner_.kv_cache(); }
  const char* name() const override { return "toy-long"; }
  void forward(std::span<const StepItem> items, std::span<float> logits) override {
    int64_t n = 0;
    for (const StepItem& it : items) {
      EXPECT_FALSE(it.decode);
      n += static_cast<int64_t>(it.tokens.size());
    }
    max_step_tokens = std::max<int64_t>(max_step_tokens, n);
    tokens += n;
    ++entered;
    gate.wait();
    if (fail_next.exchange(false)) throw Error(ErrorKind::kInternal, "injected long-path failure");
    inner_.compute(items, logits, false);
    ++steps;
  }

  std::shared_future<void> gate = [] {
    std::promise<void> p;
    p.set_value();
    return p.get_future().share();
  }();
  std::atomic<int64_t> entered{0}, steps{0}, tokens{0}, max_step_tokens{0};
  std::atomic<bool> fail_next{false};

 private:
  ToyExecutor& inner_;
};

// Polls `done` for up to 30 s (a bound for a hung scheduler, not a timing assertion).
template <typename Pred>
bool eventually(Pred done) {
  for (int i = 0; i < 30000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return done();
}

SchedulerConfig long_config() {
  SchedulerConfig cfg;
  cfg.max_prefill_chunk = 100;
  cfg.decode_prefill_chunk = 16;
  cfg.long_prefill_threshold = 40;
  cfg.long_prefill_chunk = 100;
  cfg.prefix_cache = false;
  return cfg;
}

// While a long prompt's step is held on the long path, a running request keeps decoding on the
// main path; the long prompt then finishes with the tokens the main path alone would give, and
// the main executor never computed its prompt.
TEST(SchedulerLongPath, DecodesKeepRunningWhileALongPromptIsOnTheLongPath) {
  ToyExecutor ex(256, 4);
  ex.kv_dependent = true;
  LongToy lp(ex);
  std::promise<void> open;
  lp.gate = open.get_future().share();
  Scheduler s(ex, kEos, long_config(), &lp);
  std::atomic<int64_t> decoded{0};
  auto d = run(s, "decoder", {3, 4}, 200, [&](const TokenOutput&) {
    ++decoded;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return true;
  });
  ASSERT_TRUE(eventually([&] { return decoded > 0; }));
  const std::vector<int32_t> long_prompt(150, 7);
  auto p = run(s, "long", long_prompt, 3);
  ASSERT_TRUE(eventually([&] { return lp.entered > 0; }));
  const int64_t at_entry = decoded;
  EXPECT_TRUE(eventually([&] { return decoded >= at_entry + 20; })) << "decodes stalled beside the long step";
  EXPECT_EQ(s.stats().long_running, 1);
  EXPECT_EQ(lp.steps, 0);  // still held
  open.set_value();
  auto r = p.get();
  EXPECT_EQ(r.reason, FinishReason::kLength) << r.error;
  EXPECT_EQ(r.tokens, expected_from_history(long_prompt, 3));
  EXPECT_EQ(lp.steps, 2);  // 100 + 50 tokens
  EXPECT_EQ(lp.tokens, 150);
  EXPECT_EQ(lp.max_step_tokens, 100);
  EXPECT_EQ(ex.prompt_rows, 2);  // only the decoder's prompt on the main path
  EXPECT_EQ(s.stats().long_prompt_tokens, 150);
  const auto dr = d.get();
  EXPECT_EQ(dr.reason, FinishReason::kLength);
  EXPECT_EQ(dr.tokens, expected_from_history({3, 4}, 200));
  EXPECT_TRUE(s.wait_idle(5));
  expect_all_released(ex.kv_cache());
}

// The step observer sees every main-path step: its decode rows, the prompt tokens beside them, and
// whether the long path was running a step meanwhile (what CopyPacer judges TPOT by).
TEST(SchedulerLongPath, StepObserverReportsDecodeStepsBesideTheLongStep) {
  ToyExecutor ex(256, 4);
  LongToy lp(ex);
  std::promise<void> open;
  lp.gate = open.get_future().share();
  Scheduler s(ex, kEos, long_config(), &lp);
  std::mutex mu;
  std::vector<MainStepInfo> seen;
  s.set_step_observer([&](const MainStepInfo& info) {
    std::lock_guard lock(mu);
    seen.push_back(info);
  });
  auto count = [&](auto pred) {
    std::lock_guard lock(mu);
    return std::count_if(seen.begin(), seen.end(), pred);
  };
  auto d = run(s, "decoder", {3, 4, 5}, 200, [&](const TokenOutput&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return true;
  });
  ASSERT_TRUE(eventually([&] { return count([](const MainStepInfo& i) { return i.decode_tokens == 1; }) > 3; }));
  auto p = run(s, "long", std::vector<int32_t>(150, 7), 2);
  ASSERT_TRUE(eventually([&] { return lp.entered > 0; }));
  const auto beside = [](const MainStepInfo& i) {
    return i.long_running && i.decode_tokens == 1 && i.prompt_tokens == 0 && i.seconds > 0;
  };
  EXPECT_TRUE(eventually([&] { return count(beside) >= 10; }));
  open.set_value();
  EXPECT_EQ(p.get().reason, FinishReason::kLength);
  EXPECT_EQ(d.get().reason, FinishReason::kLength);
  // The observer runs after a step's tokens are reported: the last one may still be on its way.
  const auto decodes = [&] {
    std::lock_guard lock(mu);
    int64_t n = 0;
    for (const MainStepInfo& i : seen) n += i.decode_tokens;
    return n;
  };
  EXPECT_TRUE(eventually([&] { return decodes() == 199 + 1; }))  // the decoder's after its first, the long one's second
      << decodes();
  std::lock_guard lock(mu);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().prompt_tokens, 3);  // the decoder's prompt, alone
  EXPECT_EQ(seen.front().decode_tokens, 0);
  EXPECT_FALSE(seen.front().long_running);
  EXPECT_FALSE(seen.back().long_running);  // the long prompt's second token decodes on the main path  // the decoder's tokens after the first, the long prompt's second
}

// Same outputs with and without the long path, many prompts of both kinds at once.
TEST(SchedulerLongPath, OutputsMatchTheMainPathAlone) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(i % 3 == 0 ? 45 + i * 7 : 3 + i), 0);
    for (size_t k = 0; k < p.size(); ++k) p[k] = static_cast<int32_t>(2 + (i * 13 + k * 5) % 60);
    prompts.push_back(p);
  }
  std::vector<std::vector<int32_t>> outputs[2];
  for (int with_long = 0; with_long < 2; ++with_long) {
    ToyExecutor ex(512, 4);
    ex.kv_dependent = true;
    LongToy lp(ex);
    SchedulerConfig cfg = long_config();
    cfg.max_running = 6;
    cfg.long_prefill_chunk = 64;
    Scheduler s(ex, kEos, cfg, with_long ? &lp : nullptr);
    std::vector<std::future<Result>> f;
    for (size_t i = 0; i < prompts.size(); ++i) f.push_back(run(s, "r" + std::to_string(i), prompts[i], 6));
    for (size_t i = 0; i < f.size(); ++i) {
      auto r = f[i].get();
      EXPECT_EQ(r.reason, FinishReason::kLength) << i << " " << r.error;
      EXPECT_EQ(r.tokens, expected_from_history(prompts[i], 6)) << i;
      outputs[with_long].push_back(r.tokens);
    }
    if (with_long) {
      EXPECT_GT(lp.steps, 0);
      EXPECT_LE(lp.max_step_tokens, 64);
    }
    EXPECT_TRUE(s.wait_idle(5));
    expect_all_released(ex.kv_cache());
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

// A request cancelled while its step runs on the long path finishes (aborted) when the step
// returns, and its blocks are freed then - not while the long path may still write them.
TEST(SchedulerLongPath, CancelDuringTheLongStepFreesItsBlocksAfterward) {
  ToyExecutor ex(256, 4);
  LongToy lp(ex);
  std::promise<void> open;
  lp.gate = open.get_future().share();
  Scheduler s(ex, kEos, long_config(), &lp);
  auto p = run(s, "long", std::vector<int32_t>(60, 9), 4);
  ASSERT_TRUE(eventually([&] { return lp.entered > 0; }));
  s.cancel("long");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(p.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_LT(ex.kv_cache().free_blocks(), ex.kv_cache().total_blocks());  // still held
  open.set_value();
  EXPECT_EQ(p.get().reason, FinishReason::kAbort);
  EXPECT_TRUE(s.wait_idle(5));
  expect_all_released(ex.kv_cache());
  // The path is free again.
  auto q = run(s, "after", std::vector<int32_t>(50, 5), 2).get();
  EXPECT_EQ(q.tokens, expected(std::vector<int32_t>(50, 5), 2));
}

// A failed long step fails its own requests only; the main path and later long prompts go on.
TEST(SchedulerLongPath, AFailedLongStepFailsOnlyItsRequests) {
  ToyExecutor ex(256, 4);
  LongToy lp(ex);
  Scheduler s(ex, kEos, long_config(), &lp);
  lp.fail_next = true;
  auto bad = run(s, "bad", std::vector<int32_t>(70, 4), 3);
  auto small = run(s, "small", {5, 6, 7}, 5);
  auto b = bad.get();
  EXPECT_EQ(b.reason, FinishReason::kError);
  EXPECT_NE(b.error.find("injected long-path failure"), std::string::npos) << b.error;
  EXPECT_EQ(small.get().tokens, expected({5, 6, 7}, 5));
  auto good = run(s, "good", std::vector<int32_t>(70, 4), 3).get();
  EXPECT_EQ(good.tokens, expected(std::vector<int32_t>(70, 4), 3));
  EXPECT_TRUE(s.wait_idle(5));
  expect_all_released(ex.kv_cache());
}

// Long prompts queued behind a held long step never hold back short requests; they run in order
// once the path frees.
TEST(SchedulerLongPath, ShortRequestsDoNotWaitForQueuedLongPrompts) {
  ToyExecutor ex(512, 4);
  LongToy lp(ex);
  std::promise<void> open;
  lp.gate = open.get_future().share();
  SchedulerConfig cfg = long_config();
  cfg.max_running = 8;
  Scheduler s(ex, kEos, cfg, &lp);
  std::vector<std::future<Result>> longs;
  for (int i = 0; i < 3; ++i) longs.push_back(run(s, "long" + std::to_string(i), std::vector<int32_t>(90, 10 + i), 2));
  ASSERT_TRUE(eventually([&] { return lp.entered > 0; }));
  for (int i = 0; i < 4; ++i) {
    const std::vector<int32_t> prompt = {3, static_cast<int32_t>(4 + i), 5};
    auto r = run(s, "short" + std::to_string(i), prompt, 4);
    ASSERT_EQ(r.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "short request starved";
    EXPECT_EQ(r.get().tokens, expected(prompt, 4));
  }
  EXPECT_GE(s.stats().long_waiting, 1);
  open.set_value();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(longs[static_cast<size_t>(i)].get().tokens, expected(std::vector<int32_t>(90, 10 + i), 2));
  EXPECT_TRUE(s.wait_idle(5));
  expect_all_released(ex.kv_cache());
}

// Destroying the scheduler while a long step runs waits for the step, then aborts its request.
TEST(SchedulerLongPath, ShutdownWaitsForTheLongStep) {
  ToyExecutor ex(256, 4);
  LongToy lp(ex);
  std::promise<void> open;
  lp.gate = open.get_future().share();
  std::future<Result> p;
  std::thread release;
  {
    Scheduler s(ex, kEos, long_config(), &lp);
    p = run(s, "long", std::vector<int32_t>(60, 9), 4);
    ASSERT_TRUE(eventually([&] { return lp.entered > 0; }));
    release = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      open.set_value();
    });
  }
  release.join();
  EXPECT_EQ(lp.steps, 1);
  EXPECT_EQ(p.get().reason, FinishReason::kAbort);
  expect_all_released(ex.kv_cache());
}

TEST(SchedulerLongPath, RefusesALongPathOverAnotherKvCache) {
  ToyExecutor ex(64, 4), other(64, 4);
  LongToy lp(other);
  EXPECT_THROW(Scheduler(ex, kEos, long_config(), &lp), Error);
  LongToy same(ex);
  SchedulerConfig cfg = long_config();
  cfg.long_prefill_threshold = 0;
  EXPECT_THROW(Scheduler(ex, kEos, cfg, &same), Error);
}

}  // namespace
}  // namespace hymoe
