// The scheduler: a queue of generation requests keyed by id feeding one engine loop.
// Each loop iteration admits waiting requests while KV blocks and batch slots allow, builds one
// step (one decode token for every running sequence, at most max_decode_batch of them, plus
// prefill chunks of at most max_prefill_chunk tokens, or decode_prefill_chunk when anything is
// decoding), runs it on the Executor, samples, and reports each token through the request's
// callbacks. A request's constraint (SamplingParams::constraint) masks its logits before sampling
// and follows the chosen tokens; a token it refuses ends the request with kError. When a decode
// step cannot get a KV block, the youngest running sequence is preempted (its blocks freed, its
// tokens recomputed later). Cancelling a request frees its KV blocks at the start of the next
// iteration.
// Prefix caching (SchedulerConfig::prefix_cache): at admission a sequence takes the cached KV
// blocks its tokens start with (never its last token, whose logits it needs) and prefills only
// the rest; after every step its newly completed blocks (prompt and generated tokens alike) are
// published for later requests (KvCache::publish). A preempted sequence takes its own blocks
// back the same way if they were not evicted meanwhile.
// A long-prompt path (the constructor's `long_path`, e.g. stream-loading prefill): prompt chunks
// of at least long_prefill_threshold pending tokens run on it, on a thread of its own, while the
// loop keeps stepping decodes and short prompts on the main executor. Both executors write the
// same KvCache; the loop keeps all KV bookkeeping (a sequence on the long path holds its blocks
// and is left out of the main steps, preemption and release until its step returns). Prompts
// for a busy long path wait for it rather than run on the main executor: the threshold is the
// measured crossover, past which the hybrid path's CPU experts take longer than its next step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hymoe/engine/executor.h"
#include "hymoe/engine/sampler.h"
#include "hymoe/engine/sampling_params.h"

namespace hymoe {

enum class FinishReason { kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

struct TokenOutput {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
  int64_t index = 0;  // 0 for the first generated token
  // No token follows: the length limit (max_tokens or the context) ends the request after this
  // one, so a receiver can release text it holds back with this token, not at on_finish.
  bool last = false;
};

struct GenerationCallbacks {
  // Engine thread, once per generated token. Return false to finish the request now with
  // reason kStop (e.g. a stop string matched in the text).
  std::function<bool(const TokenOutput&)> on_token;
  // Engine thread, exactly once, last. `error` is empty unless reason == kError.
  std::function<void(FinishReason reason, const std::string& error)> on_finish;
  // Engine thread, at most once, before any on_token: the request got its KV blocks, the first
  // `cached_tokens` prompt tokens from the prefix cache (0 on a miss or with it off). Optional.
  std::function<void(int64_t cached_tokens)> on_admitted;
};

struct GenerationRequest {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  GenerationCallbacks callbacks;
};

struct SchedulerConfig {
  int32_t max_running = 8;           // sequences admitted at once (the long path's included)
  // Decode tokens a main step takes at most (0: every running sequence's). Beyond it the
  // sequences served longest ago go first (ties: the oldest), so none waits more than
  // ceil(decoding / max_decode_batch) steps for its next token. A step's time grows with its
  // batch (more experts read): this bounds the decodes' step time while more requests stay
  // admitted, e.g. prompts on the long path.
  int32_t max_decode_batch = 0;
  int32_t max_waiting = 256;         // queue bound; beyond it submit() throws kResourceExhausted
  int64_t max_prefill_chunk = 512;   // prompt tokens per step while nothing is decoding
  // Prompt tokens per step while other sequences are decoding: a step's time is the decode
  // tokens' inter-token latency, so a long prefill is cut finer beside them.
  int64_t decode_prefill_chunk = 64;
  // With a long path (the constructor's long_path): prompts with at least this many tokens
  // pending go to it (the runtime: --slp-threshold), in steps of up to long_prefill_chunk tokens
  // over one or more sequences (0 = max_prefill_chunk; the runtime: SLP's step limit, since each
  // of its steps streams every routed expert once whatever its length). Unused without one.
  int64_t long_prefill_threshold = 0;
  int64_t long_prefill_chunk = 0;
  int64_t max_context = 0;           // prompt + generation; 0 = the model's max_position
  // Ids at or past this are never sampled (the model's vocabulary is padded past the
  // tokenizer's: DeepSeek-V3 has 129280 rows for 128815 tokens). 0 = the whole vocabulary.
  int64_t sample_vocab = 0;
  bool prefix_cache = true;          // share full KV blocks of equal token prefixes (KvCache)
};

struct SchedulerStats {
  int64_t running = 0;
  int64_t waiting = 0;
  double kv_usage = 0.0;
  int64_t preemptions = 0;
  // Prefix cache, counted in tokens at each request's first admission (vLLM's
  // prefix_cache_queries / prefix_cache_hits): prompt tokens looked up, and those found.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  // The long-prompt path (zero without one): sequences in its running step, sequences waiting
  // for it, prompt tokens it computed; the main path's prompt tokens beside.
  int64_t long_running = 0;
  int64_t long_waiting = 0;
  int64_t long_prompt_tokens = 0;
  int64_t main_prompt_tokens = 0;
};

// What the loop reports after each main-path step (Scheduler::set_step_observer).
struct MainStepInfo {
  double seconds = 0;          // the step's wall time: forward, sampling, token callbacks
  int64_t decode_tokens = 0;   // decode rows in it (its TPOT is `seconds` for each of them)
  int64_t prompt_tokens = 0;   // prompt tokens beside them
  bool long_running = false;   // the long path was running a step meanwhile
};

class Scheduler {
 public:
  // long_path (optional) must share the executor's KvCache object and vocabulary
  // (kInvalidArgument otherwise) and needs config.long_prefill_threshold > 0.
  Scheduler(Executor& executor, int32_t eos_token, SchedulerConfig config, Executor* long_path = nullptr);
  ~Scheduler();  // stops the loop; unfinished requests finish with kAbort
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws hymoe::Error: kInvalidArgument for an empty prompt, token ids out
  // of the vocabulary, logit_bias ids that cannot be sampled (past sample_vocab) or not sorted
  // and unique, a constraint with ignore_eos, or prompt + max_tokens beyond the context;
  // kResourceExhausted when the queue is full or the prompt can never fit the KV cache;
  // kUnavailable after stop_accepting().
  void submit(GenerationRequest request);
  // Finishes the request with kAbort (if still known) and frees its KV. Safe from any thread.
  void cancel(const std::string& id);

  // No new requests; in-flight ones continue.
  void stop_accepting();
  // Blocks until no request is queued or running, or the timeout passes; true when drained.
  bool wait_idle(double timeout_seconds);

  SchedulerStats stats() const;
  int64_t max_context() const { return max_context_; }
  // Called after each step with fresh stats (for metrics); set before submitting.
  void set_stats_listener(std::function<void(const SchedulerStats&)> listener);
  // Called on the loop thread after each main-path step (e.g. to pace the long path's copies
  // from the decodes' step times: CopyPacer); set before submitting.
  void set_step_observer(std::function<void(const MainStepInfo&)> observer);

 private:
  struct Sequence;
  struct LongStep;
  void loop();
  void run_step(std::vector<Sequence*>& running);
  // Samples and reports the step's logits rows (items in order, rows for want_logits) after
  // publishing the owners' completed blocks.
  void complete(std::span<const StepItem> items, std::span<Sequence* const> owners, std::span<float> logits);
  bool on_long_path(const Sequence& s) const;  // a prompt the long path takes (pending >= threshold)
  void start_long_step();                      // the eligible chunks to the long thread, if idle
  void finish_long_step();                     // its result sampled, its sequences back to the loop
  void long_main();
  void finish(Sequence& s, FinishReason reason, const std::string& error);
  bool admit(Sequence& s);  // KV for the pending tokens (cached prefix first); false when full

  Executor& executor_;
  Executor* long_path_;
  KvCache& kv_;
  const int32_t eos_;
  const SchedulerConfig config_;
  int64_t max_context_ = 0;
  uint64_t main_steps_ = 0;  // main-path steps run (loop thread)
  Sampler sampler_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::unique_ptr<Sequence>> incoming_;       // submitted, not yet seen by the loop
  std::vector<std::string> cancelled_;
  bool accepting_ = true;
  bool stopping_ = false;
  int64_t active_ = 0;  // submitted and not yet finished (what wait_idle waits for)
  bool has_work_ = false;  // the loop's last pass left main-path work (else it waits for an event)
  SchedulerStats stats_;
  std::function<void(const SchedulerStats&)> listener_;
  std::function<void(const MainStepInfo&)> step_observer_;

  // Owned by the loop thread.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<float> logits_;
  // The long path's step: filled by the loop, run by long_thread_, taken back by the loop once
  // long_done_ (all under mutex_).
  std::unique_ptr<LongStep> long_step_;
  bool long_busy_ = false, long_done_ = false, long_stop_ = false;
  std::condition_variable long_wake_;
  std::thread long_thread_;
  std::thread thread_;
};

}  // namespace hymoe
