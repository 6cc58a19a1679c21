#include "hymoe/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/common/stopwatch.h"

namespace hymoe {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "error";
}

struct Scheduler::Sequence {
  GenerationRequest req;
  std::vector<int32_t> tokens;     // prompt then generated; KV exists for the first `table.tokens`
  int64_t prompt_len = 0;
  int64_t generated = 0;
  BlockTable table;
  uint64_t seed = 0;
  std::unique_ptr<TokenConstraint> constraint;  // SamplingParams::constraint's state, or null
  uint64_t order = 0;              // admission order, for preemption (youngest first)
  uint64_t served = 0;             // the main step that last took a token of it (max_decode_batch)
  bool admitted = false;           // once admitted (preemption does not reset it)
  bool done = false;
  bool in_long = false;            // in the long path's running step (its KV is written there)
  bool cancel_after_long = false;  // cancelled while in_long: finished when the step returns

  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - table.tokens; }
};

struct Scheduler::LongStep {
  std::vector<StepItem> items;
  std::vector<Sequence*> owners;
  std::vector<float> logits;
  std::string error;  // set when the step failed
};

Scheduler::Scheduler(Executor& executor, int32_t eos_token, SchedulerConfig config, Executor* long_path)
    : executor_(executor),
      long_path_(long_path),
      kv_(executor.kv_cache()),
      eos_(eos_token),
      config_(config),
      sampler_(static_cast<int32_t>(executor.config().vocab_size)) {
  HYMOE_CHECK(config.max_decode_batch >= 0, kInvalidArgument, "scheduler: max_decode_batch {} (0 = no bound)",
              config.max_decode_batch);
  HYMOE_CHECK(config.max_running > 0 && config.max_prefill_chunk > 0 && config.decode_prefill_chunk > 0,
              kInvalidArgument, "scheduler: max_running and the prefill chunks must be positive");
  max_context_ = config.max_context > 0 ? config.max_context : executor.config().max_position_embeddings;
  logits_.resize(static_cast<size_t>(config.max_running + 1) * static_cast<size_t>(executor.config().vocab_size));
  if (long_path_) {
    HYMOE_CHECK(&long_path_->kv_cache() == &kv_ && long_path_->config().vocab_size == executor.config().vocab_size,
                kInvalidArgument, "scheduler: the long-prompt path ({}) must share the KV cache and vocabulary of {}",
                long_path_->name(), executor.name());
    HYMOE_CHECK(config.long_prefill_threshold > 0, kInvalidArgument,
                "scheduler: a long-prompt path needs long_prefill_threshold > 0");
    long_thread_ = std::thread([this] { long_main(); });
  }
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    accepting_ = false;
  }
  wake_.notify_all();
  thread_.join();
}

void Scheduler::submit(GenerationRequest request) {
  const int64_t vocab = executor_.config().vocab_size;
  HYMOE_CHECK(!request.prompt.empty(), kInvalidArgument, "request {}: the prompt is empty", request.id);
  for (int32_t t : request.prompt) {
    HYMOE_CHECK(t >= 0 && t < vocab, kInvalidArgument, "request {}: token id {} is outside the vocabulary [0, {})",
                request.id, t, vocab);
  }
  // logit_bias reaches only ids that can be sampled (the server says so with a 400 first).
  const int64_t sampled = config_.sample_vocab > 0 ? std::min(config_.sample_vocab, vocab) : vocab;
  const auto& bias = request.sampling.logit_bias;
  for (size_t i = 0; i < bias.size(); ++i) {
    const int32_t t = bias[i].first;
    HYMOE_CHECK(t >= 0 && t < sampled, kInvalidArgument, "request {}: logit_bias token id {} is outside the vocabulary [0, {})",
                request.id, t, sampled);
    HYMOE_CHECK(i == 0 || bias[i - 1].first < t, kInvalidArgument,
                "request {}: logit_bias must be sorted by token id without repeats (id {})", request.id, t);
  }
  HYMOE_CHECK(!request.sampling.constraint || !request.sampling.ignore_eos, kInvalidArgument,
              "request {}: ignore_eos cannot be combined with constrained decoding", request.id);
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  HYMOE_CHECK(prompt < max_context_, kInvalidArgument,
              "request {}: the prompt has {} tokens; this model's context is {} tokens", request.id, prompt,
              max_context_);
  auto& mt = request.sampling.max_tokens;
  if (mt <= 0 || prompt + mt > max_context_) {
    HYMOE_CHECK(mt <= 0, kInvalidArgument,
                "request {}: prompt ({} tokens) + max_tokens ({}) exceeds the context of {} tokens", request.id,
                prompt, mt, max_context_);
    mt = static_cast<int32_t>(max_context_ - prompt);
  }
  HYMOE_CHECK(kv_.blocks_for(prompt + 1) <= kv_.total_blocks(), kResourceExhausted,
              "request {}: the prompt ({} tokens) does not fit the KV cache ({} tokens)", request.id, prompt,
              kv_.capacity_tokens());

  auto s = std::make_unique<Sequence>();
  s->prompt_len = prompt;
  s->tokens = request.prompt;
  s->seed = request.sampling.seed ? *request.sampling.seed : std::random_device{}() * 0x100000001ull;
  if (request.sampling.constraint) s->constraint = request.sampling.constraint->start();
  s->req = std::move(request);
  {
    std::lock_guard lock(mutex_);
    HYMOE_CHECK(accepting_, kUnavailable, "the server is shutting down");
    HYMOE_CHECK(static_cast<int64_t>(incoming_.size()) + stats_.waiting < config_.max_waiting,
                kResourceExhausted, "too many queued requests ({}); retry later", config_.max_waiting);
    incoming_.push_back(std::move(s));
    ++active_;
  }
  wake_.notify_one();
}

void Scheduler::cancel(const std::string& id) {
  {
    std::lock_guard lock(mutex_);
    cancelled_.push_back(id);
  }
  wake_.notify_one();
}

void Scheduler::stop_accepting() {
  std::lock_guard lock(mutex_);
  accepting_ = false;
}

bool Scheduler::wait_idle(double timeout_seconds) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), [this] { return active_ == 0; });
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Scheduler::set_stats_listener(std::function<void(const SchedulerStats&)> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void Scheduler::set_step_observer(std::function<void(const MainStepInfo&)> observer) {
  std::lock_guard lock(mutex_);
  step_observer_ = std::move(observer);
}

void Scheduler::finish(Sequence& s, FinishReason reason, const std::string& error) {
  if (s.done) return;
  s.done = true;
  kv_.release(s.table);
  try {
    if (s.req.callbacks.on_finish) s.req.callbacks.on_finish(reason, error);
  } catch (const std::exception& e) {
    log::get("sched")->error("request {}: on_finish failed: {}", s.req.id, e.what());
  }
  {
    std::lock_guard lock(mutex_);
    if (--active_ == 0) idle_.notify_all();
  }
}

bool Scheduler::admit(Sequence& s) {
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  int64_t cached = 0;
  if (config_.prefix_cache) cached = kv_.take_prefix(s.table, s.tokens, n - 1);
  if (!kv_.reserve(s.table, n)) {
    kv_.release(s.table);
    return false;
  }
  if (!s.admitted) {
    s.admitted = true;
    {
      std::lock_guard lock(mutex_);
      stats_.prefix_cache_queries += config_.prefix_cache ? s.prompt_len : 0;
      stats_.prefix_cache_hits += cached;
    }
    try {
      if (s.req.callbacks.on_admitted) s.req.callbacks.on_admitted(cached);
    } catch (const std::exception& e) {
      log::get("sched")->error("request {}: on_admitted failed: {}", s.req.id, e.what());
    }
  }
  return true;
}

void Scheduler::loop() {
  uint64_t order = 0;
  while (true) {
    std::vector<std::string> cancelled;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !incoming_.empty() || !cancelled_.empty() || long_done_ || has_work_; });
      if (stopping_) break;
      while (!incoming_.empty()) {
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      cancelled.swap(cancelled_);
    }
    if (long_path_) {
      bool done = false;
      {
        std::lock_guard lock(mutex_);
        done = long_done_;
      }
      if (done) finish_long_step();
    }
    for (const auto& id : cancelled) {
      for (auto& s : waiting_) {
        if (s->req.id == id) finish(*s, FinishReason::kAbort, "");
      }
      for (auto& s : running_) {
        if (s->req.id != id) continue;
        if (s->in_long) {
          s->cancel_after_long = true;  // its blocks are being written: freed when the step returns
        } else {
          finish(*s, FinishReason::kAbort, "");
        }
      }
    }
    std::erase_if(waiting_, [](const auto& s) { return s->done; });
    std::erase_if(running_, [](const auto& s) { return s->done; });

    // Admission: FIFO while slots and KV blocks for the whole pending prefill allow.
    bool admission_blocked = false;  // KV full: retried once a step has run or freed blocks
    while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < config_.max_running) {
      Sequence& s = *waiting_.front();
      if (!admit(s)) {
        if (running_.empty()) {  // nothing will ever free blocks for it
          finish(s, FinishReason::kError, "the prompt does not fit the KV cache");
          waiting_.pop_front();
          continue;
        }
        admission_blocked = true;
        break;
      }
      s.order = order++;
      running_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }

    start_long_step();
    std::vector<Sequence*> batch;
    for (auto& s : running_) {
      if (!s->in_long && !on_long_path(*s)) batch.push_back(s.get());
    }
    if (!batch.empty()) {
      run_step(batch);
      std::erase_if(running_, [](const auto& s) { return s->done; });
    }

    // Sleep until something arrives (a request, a cancel, the long step's end) unless the main
    // path has work or a waiting request may now be admitted (preempted ones, freed slots).
    bool work = !waiting_.empty() && static_cast<int32_t>(running_.size()) < config_.max_running &&
                (!admission_blocked || !batch.empty());
    int64_t long_running = 0, long_waiting = 0;
    for (const auto& s : running_) {
      if (s->in_long) {
        ++long_running;
      } else if (on_long_path(*s)) {
        ++long_waiting;  // the long path was busy (start_long_step ran above): its end wakes the loop
      } else {
        work = true;
      }
    }
    SchedulerStats snapshot;
    std::function<void(const SchedulerStats&)> listener;
    {
      std::lock_guard lock(mutex_);
      has_work_ = work;
      stats_.running = static_cast<int64_t>(running_.size());
      stats_.waiting = static_cast<int64_t>(waiting_.size());
      stats_.long_running = long_running;
      stats_.long_waiting = long_waiting;
      stats_.kv_usage = kv_.usage();
      snapshot = stats_;
      listener = listener_;
    }
    if (listener) listener(snapshot);
  }
  // Shutdown: the long path's step (if any) runs to its end first; then everything still known
  // finishes as aborted.
  if (long_thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      long_stop_ = true;
    }
    long_wake_.notify_all();
    long_thread_.join();
    if (long_step_) {
      for (Sequence* s : long_step_->owners) s->in_long = false;
      long_step_.reset();
    }
  }
  for (auto& s : running_) finish(*s, FinishReason::kAbort, "server shutting down");
  for (auto& s : waiting_) finish(*s, FinishReason::kAbort, "server shutting down");
  std::deque<std::unique_ptr<Sequence>> late;
  {
    std::lock_guard lock(mutex_);
    late.swap(incoming_);
  }
  for (auto& s : late) finish(*s, FinishReason::kAbort, "server shutting down");
}

void Scheduler::run_step(std::vector<Sequence*>& batch) {
  // Decode sequences (one pending token) first: each needs room for one more token; when the
  // cache is full, preempt the youngest sequence (blocks freed, recomputed after readmission).
  std::sort(batch.begin(), batch.end(), [](const Sequence* a, const Sequence* b) { return a->order < b->order; });
  std::vector<StepItem> items;
  std::vector<Sequence*> owners;
  const bool decoding = std::any_of(batch.begin(), batch.end(), [](const Sequence* s) { return s->pending() == 1; });
  int64_t prefill_budget = decoding ? config_.decode_prefill_chunk : config_.max_prefill_chunk;
  // Past max_decode_batch decodes, those served longest ago (then the oldest) take this step.
  std::vector<const Sequence*> held;  // decodes left for a later step
  if (config_.max_decode_batch > 0) {
    std::vector<Sequence*> ready;
    for (Sequence* s : batch)
      if (!s->done && s->pending() == 1) ready.push_back(s);
    if (ready.size() > static_cast<size_t>(config_.max_decode_batch)) {
      std::stable_sort(ready.begin(), ready.end(), [](const Sequence* a, const Sequence* b) { return a->served < b->served; });
      held.assign(ready.begin() + config_.max_decode_batch, ready.end());
    }
  }
  ++main_steps_;
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence* s = batch[i];
    if (s->done || std::find(held.begin(), held.end(), s) != held.end()) continue;
    const int64_t pending = s->pending();
    const int64_t n = pending == 1 ? 1 : std::min(pending, prefill_budget);
    if (n <= 0) continue;  // prefill budget spent this step
    while (!kv_.reserve(s->table, s->table.tokens + n)) {
      // Preempt the youngest other running sequence; if s is the youngest, preempt s itself.
      Sequence* victim = batch.back();
      kv_.release(victim->table);
      victim->table.tokens = 0;
      batch.pop_back();
      {
        std::lock_guard lock(mutex_);
        ++stats_.preemptions;
      }
      for (size_t k = 0; k < running_.size(); ++k) {
        if (running_[k].get() == victim) {
          waiting_.push_front(std::move(running_[k]));
          running_.erase(running_.begin() + static_cast<ptrdiff_t>(k));
          break;
        }
      }
      log::get("sched")->info("request {}: preempted (KV cache full); will recompute", victim->req.id);
      if (victim == s) break;
    }
    if (i >= batch.size() || batch[i] != s) break;  // s itself was preempted
    if (pending > 1) prefill_budget -= n;
    StepItem item;
    item.table = &s->table;
    item.start = s->table.tokens;
    item.tokens = std::span<const int32_t>(s->tokens).subspan(static_cast<size_t>(s->table.tokens), static_cast<size_t>(n));
    item.want_logits = (n == pending);
    item.decode = n == 1 && s->table.tokens >= s->prompt_len;
    items.push_back(item);
    owners.push_back(s);
    s->served = main_steps_;
  }
  if (items.empty()) return;

  const size_t vocab = static_cast<size_t>(executor_.config().vocab_size);
  size_t rows = 0;
  int64_t prompt_tokens = 0;
  for (const auto& it : items) {
    rows += it.want_logits ? 1 : 0;
    prompt_tokens += it.decode ? 0 : static_cast<int64_t>(it.tokens.size());
  }
  if (logits_.size() < rows * vocab) logits_.resize(rows * vocab);
  const auto t_step = SteadyClock::now();
  try {
    executor_.forward(items, std::span<float>(logits_.data(), rows * vocab));
  } catch (const std::exception& e) {
    log::get("sched")->error("step failed: {}", e.what());
    for (Sequence* s : owners) finish(*s, FinishReason::kError, e.what());
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stats_.main_prompt_tokens += prompt_tokens;
  }
  complete(items, owners, std::span<float>(logits_.data(), rows * vocab));
  std::function<void(const MainStepInfo&)> observer;
  {
    std::lock_guard lock(mutex_);
    observer = step_observer_;
  }
  if (observer) {
    MainStepInfo info;
    info.seconds = seconds_since(t_step);
    info.decode_tokens = static_cast<int64_t>(items.size()) - std::count_if(items.begin(), items.end(),
                                                                             [](const StepItem& it) { return !it.decode; });
    info.prompt_tokens = prompt_tokens;
    info.long_running = long_busy_;  // set and cleared by this thread: a long step ran during this one
    observer(info);
  }
}

bool Scheduler::on_long_path(const Sequence& s) const {
  return long_path_ && !s.done && s.pending() >= config_.long_prefill_threshold;
}

void Scheduler::start_long_step() {
  if (!long_path_ || long_busy_) return;
  auto st = std::make_unique<LongStep>();
  int64_t budget = config_.long_prefill_chunk > 0 ? config_.long_prefill_chunk : config_.max_prefill_chunk;
  std::vector<Sequence*> order;
  for (auto& s : running_) {
    if (!s->in_long && on_long_path(*s)) order.push_back(s.get());
  }
  std::sort(order.begin(), order.end(), [](const Sequence* a, const Sequence* b) { return a->order < b->order; });
  for (Sequence* s : order) {
    const int64_t pending = s->pending();
    const int64_t n = std::min(pending, budget);
    if (n < std::min(pending, config_.long_prefill_threshold)) break;  // too little room left this step
    if (!kv_.reserve(s->table, s->table.tokens + n)) continue;  // (admission reserved the prompt)
    StepItem item;
    item.table = &s->table;
    item.start = s->table.tokens;
    item.tokens = std::span<const int32_t>(s->tokens).subspan(static_cast<size_t>(s->table.tokens), static_cast<size_t>(n));
    item.want_logits = n == pending;
    st->items.push_back(item);
    st->owners.push_back(s);
    s->in_long = true;
    budget -= n;
  }
  if (st->items.empty()) return;
  {
    std::lock_guard lock(mutex_);
    long_step_ = std::move(st);
    long_busy_ = true;
    long_done_ = false;
  }
  long_wake_.notify_all();
}

void Scheduler::long_main() {
  std::unique_lock lock(mutex_);
  for (;;) {
    long_wake_.wait(lock, [this] { return long_stop_ || (long_busy_ && !long_done_); });
    if (long_stop_) return;
    LongStep& st = *long_step_;
    lock.unlock();
    size_t rows = 0;
    for (const StepItem& it : st.items) rows += it.want_logits ? 1 : 0;
    try {
      st.logits.resize(rows * static_cast<size_t>(long_path_->config().vocab_size));
      long_path_->forward(st.items, st.logits);
    } catch (const std::exception& e) {
      st.error = e.what()[0] ? e.what() : "the long-prompt step failed";
    }
    lock.lock();
    long_done_ = true;
    wake_.notify_all();
  }
}

void Scheduler::finish_long_step() {
  std::unique_ptr<LongStep> st;
  {
    std::lock_guard lock(mutex_);
    st = std::move(long_step_);
    long_busy_ = false;
    long_done_ = false;
  }
  if (!st) return;
  int64_t tokens = 0;
  for (size_t i = 0; i < st->items.size(); ++i) {
    st->owners[i]->in_long = false;
    tokens += static_cast<int64_t>(st->items[i].tokens.size());
  }
  if (!st->error.empty()) {
    log::get("sched")->error("long-prompt step ({}) failed: {}", long_path_->name(), st->error);
    for (Sequence* s : st->owners) finish(*s, FinishReason::kError, st->error);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stats_.long_prompt_tokens += tokens;
  }
  for (Sequence* s : st->owners) {
    if (s->cancel_after_long) finish(*s, FinishReason::kAbort, "");
  }
  complete(st->items, st->owners, st->logits);
}

void Scheduler::complete(std::span<const StepItem> items, std::span<Sequence* const> owners, std::span<float> logits) {
  const size_t vocab = static_cast<size_t>(executor_.config().vocab_size);
  // Completed blocks become shareable before anything can finish and release them.
  if (config_.prefix_cache) {
    for (Sequence* s : owners) {
      if (!s->done) kv_.publish(s->table, s->tokens);
    }
  }

  size_t row = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].want_logits) continue;
    Sequence& s = *owners[i];
    float* row_data = logits.data() + row * vocab;
    ++row;
    if (config_.sample_vocab > 0 && static_cast<size_t>(config_.sample_vocab) < vocab) {
      std::fill(row_data + config_.sample_vocab, row_data + vocab, -std::numeric_limits<float>::infinity());
    }
    if (s.done) continue;
    if (s.constraint) s.constraint->mask(std::span<float>(row_data, vocab));
    std::span<const float> logit_row(row_data, vocab);
    const std::span<const int32_t> generated(s.tokens.data() + s.prompt_len, static_cast<size_t>(s.generated));
    SampledToken t = sampler_.sample(logit_row, s.req.sampling, generated, s.seed, static_cast<uint64_t>(s.generated));
    if (s.constraint && !s.constraint->accept(t.token)) {
      finish(s, FinishReason::kError, fmt::format("constrained decoding: no allowed token has a finite logit "
                                                  "(sampled {})", t.token));
      continue;
    }
    if (t.token == eos_ && !s.req.sampling.ignore_eos) {
      finish(s, FinishReason::kStop, "");
      continue;
    }
    s.tokens.push_back(t.token);
    TokenOutput out{t.token, t.logprob, std::move(t.top), s.generated};
    ++s.generated;
    const bool at_length = s.generated >= s.req.sampling.max_tokens ||
                           static_cast<int64_t>(s.tokens.size()) >= max_context_;
    out.last = at_length;
    bool keep_going = true;
    try {
      if (s.req.callbacks.on_token) keep_going = s.req.callbacks.on_token(out);
    } catch (const std::exception& e) {
      finish(s, FinishReason::kError, e.what());
      continue;
    }
    if (!keep_going) {
      finish(s, FinishReason::kStop, "");
    } else if (at_length) {
      finish(s, FinishReason::kLength, "");
    }
  }
}

}  // namespace hymoe
