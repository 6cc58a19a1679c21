// One request's generation as the HTTP side sees it. The engine thread feeds tokens in through
// on_token/on_finish (the scheduler's callbacks); the HTTP thread takes text out with wait().
// Detokenisation (whole UTF-8 characters, stop strings across tokens), the reasoning split, the
// tool-call parse of the content, log-probabilities and per-request metrics happen here, on the
// engine thread, per token.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hymoe/scheduler/scheduler.h"
#include "hymoe/server/metrics.h"
#include "hymoe/server/openai_response.h"
#include "hymoe/server/reasoning.h"
#include "hymoe/server/tool_calls.h"
#include "hymoe/tokenizer/streaming_detokenizer.h"

namespace hymoe::server {

struct GenerationOptions {
  std::string id;
  std::vector<std::string> stop;
  bool logprobs = false;
  bool split_reasoning = false;   // route <think> text to reasoning_content
  bool starts_in_reasoning = false;
  // Tool calls parsed out of the content (format kNone: none). The reasoning is not parsed.
  ToolCallParserOptions tool_calls;
  // Special tokens the text keeps (the tool-call markers where they are special tokens).
  std::vector<tokenizer::TokenId> keep_special;
  int64_t prompt_tokens = 0;
};

class Generation {
 public:
  using Clock = std::chrono::steady_clock;

  Generation(const tokenizer::Tokenizer& tokenizer, GenerationOptions options, Metrics* metrics);

  // ---- engine thread
  bool on_token(const TokenOutput& token);  // false once a stop string matched
  void on_admitted(int64_t cached_tokens);
  void on_finish(FinishReason reason, const std::string& error);
  GenerationCallbacks callbacks(std::shared_ptr<Generation> self);

  // ---- HTTP thread
  struct Delta {
    std::string content;
    std::string reasoning;
    std::vector<ToolCall> tool_calls;  // taken since the last wait()
    std::vector<size_t> tool_call_at;  // tool_calls[i] follows content[0, tool_call_at[i])
    std::vector<TokenLogprob> logprobs;
    bool finished = false;
    FinishReason reason = FinishReason::kStop;
    std::string error;
  };
  // Waits up to `timeout` for news, then moves everything pending into `out`. False on timeout
  // with nothing new.
  bool wait(Delta& out, std::chrono::milliseconds timeout);

  Usage usage() const;
  const GenerationOptions& options() const { return options_; }
  bool saw_reasoning() const;
  int32_t tool_call_count() const;

 private:
  void emit_text(const std::string& text);  // caller holds mutex_
  void emit_content(const std::string& text);  // through the tool-call parser; caller holds mutex_
  // Emits the text the detokenizer and the reasoning splitter hold back (an incomplete UTF-8
  // character, a possible stop-string or tag prefix): at the last token (TokenOutput::last), so
  // it streams with that token's text, and at on_finish (then usually nothing). Caller holds
  // mutex_.
  void flush_held();

  const tokenizer::Tokenizer& tokenizer_;
  GenerationOptions options_;
  Metrics* metrics_;
  tokenizer::StreamingDetokenizer detok_;
  ReasoningSplitter splitter_;
  ToolCallParser tool_parser_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_token_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  Delta pending_;
  bool news_ = false;
  int64_t completion_tokens_ = 0;
  int64_t cached_tokens_ = 0;
};

}  // namespace hymoe::server
