#include "hymoe/server/generation.h"

#include "hymoe/common/log.h"

namespace hymoe::server {

Generation::Generation(const tokenizer::Tokenizer& tokenizer, GenerationOptions options, Metrics* metrics)
    : tokenizer_(tokenizer),
      options_(std::move(options)),
      metrics_(metrics),
      detok_(tokenizer, tokenizer::StreamingDetokenizer::Options{.skip_special = true,
                                                                  .stop = options_.stop,
                                                                  .keep_special = options_.keep_special}),
      splitter_(options_.starts_in_reasoning),
      tool_parser_(options_.tool_calls) {}

GenerationCallbacks Generation::callbacks(std::shared_ptr<Generation> self) {
  GenerationCallbacks cb;
  cb.on_token = [self](const TokenOutput& t) { return self->on_token(t); };
  cb.on_finish = [self](FinishReason r, const std::string& e) { self->on_finish(r, e); };
  cb.on_admitted = [self](int64_t cached) { self->on_admitted(cached); };
  return cb;
}

void Generation::emit_content(const std::string& text) {
  if (text.empty()) return;
  auto d = tool_parser_.push(text);
  for (size_t i = 0; i < d.calls.size(); ++i) {
    pending_.tool_calls.push_back(std::move(d.calls[i]));
    pending_.tool_call_at.push_back(pending_.content.size() + d.call_at[i]);
  }
  pending_.content += d.content;
}

void Generation::emit_text(const std::string& text) {
  if (text.empty()) return;
  if (!options_.split_reasoning) {
    emit_content(text);
  } else {
    auto d = splitter_.push(text);
    emit_content(d.content);
    pending_.reasoning += d.reasoning;
  }
  news_ = true;
}

void Generation::flush_held() {
  emit_text(detok_.finish());
  if (options_.split_reasoning) {
    auto d = splitter_.finish();
    emit_content(d.content);
    pending_.reasoning += d.reasoning;
    if (!d.content.empty() || !d.reasoning.empty()) news_ = true;
  }
  auto d = tool_parser_.finish();
  if (!d.content.empty()) {
    pending_.content += d.content;
    news_ = true;
  }
}

void Generation::on_admitted(int64_t cached_tokens) {
  std::lock_guard lock(mutex_);
  cached_tokens_ = cached_tokens;
}

bool Generation::on_token(const TokenOutput& t) {
  const auto now = Clock::now();
  if (metrics_) {
    if (t.index == 0) {
      metrics_->on_first_token(std::chrono::duration<double>(now - start_).count());
    } else {
      metrics_->on_token(std::chrono::duration<double>(now - last_token_).count());
    }
  }
  last_token_ = now;
  std::string text = detok_.push(t.token);
  {
    std::lock_guard lock(mutex_);
    ++completion_tokens_;
    if (options_.logprobs) {
      TokenLogprob lp;
      lp.bytes = std::string(tokenizer_.token_bytes(t.token));
      lp.token = lp.bytes;
      lp.logprob = t.logprob;
      for (const auto& [id, v] : t.top) {
        std::string b(tokenizer_.token_bytes(id));
        lp.top.emplace_back(b, v);
        lp.top_bytes.push_back(b);
      }
      pending_.logprobs.push_back(std::move(lp));
      news_ = true;
    }
    emit_text(text);
    if (t.last) flush_held();
  }
  cv_.notify_one();
  return !detok_.stopped();
}

void Generation::on_finish(FinishReason reason, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    flush_held();
    pending_.finished = true;
    pending_.reason = reason;
    pending_.error = error;
    news_ = true;
  }
  cv_.notify_one();
  const double e2e = std::chrono::duration<double>(Clock::now() - start_).count();
  if (metrics_) {
    FinishedReason fr = reason == FinishReason::kStop     ? FinishedReason::kStop
                        : reason == FinishReason::kLength ? FinishedReason::kLength
                        : reason == FinishReason::kAbort  ? FinishedReason::kAbort
                                                          : FinishedReason::kError;
    metrics_->on_finished(fr, options_.prompt_tokens, completion_tokens_, e2e);
  }
  const double gen_s = std::chrono::duration<double>(last_token_ - start_).count();
  log::get("server")->info("request {} {}: prompt {} tokens ({} cached), output {} tokens, {:.3f} s, {:.1f} tokens/s{}{}",
                           options_.id, finish_reason_name(reason), options_.prompt_tokens, cached_tokens_,
                           completion_tokens_, e2e,
                           completion_tokens_ > 1 && gen_s > 0 ? (completion_tokens_ - 1) / gen_s : 0.0,
                           error.empty() ? "" : ": ", error);
}

bool Generation::wait(Delta& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [this] { return news_; })) return false;
  out = std::move(pending_);
  pending_ = Delta{};
  news_ = false;
  return true;
}

Usage Generation::usage() const {
  std::lock_guard lock(mutex_);
  return Usage{options_.prompt_tokens, completion_tokens_, cached_tokens_};
}

int32_t Generation::tool_call_count() const {
  std::lock_guard lock(mutex_);
  return tool_parser_.call_count();
}

bool Generation::saw_reasoning() const {
  std::lock_guard lock(mutex_);
  return splitter_.saw_reasoning();
}

}  // namespace hymoe::server
