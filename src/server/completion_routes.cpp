// POST /v1/chat/completions and /v1/completions, streamed (SSE) and not.
#include <httplib.h>

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "hymoe/common/error.h"
#include "hymoe/server/api_error.h"
#include "hymoe/server/generation.h"
#include "hymoe/server/http_server.h"
#include "hymoe/server/openai_request.h"
#include "hymoe/server/tool_calls.h"
#include "hymoe/tokenizer/chat_template.h"
#include "http_routes.h"
#include "peer_watch.h"

namespace hymoe::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

void check_model(const ServedModel& m, const std::string& requested) {
  if (requested != m.name) {
    ApiError e;
    e.status = 404;
    e.message = fmt::format("The model '{}' does not exist; this server serves '{}'", requested, m.name);
    e.param = "model";
    e.code = "model_not_found";
    throw ApiException(e);
  }
}

void check_context(const ServedModel& m, int64_t prompt_tokens, int32_t max_tokens) {
  if (prompt_tokens >= m.max_context || (max_tokens > 0 && prompt_tokens + max_tokens > m.max_context)) {
    throw ApiException(ApiError::invalid(
        fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the "
                    "prompt, {} for the completion).",
                    m.max_context, prompt_tokens + max_tokens, prompt_tokens, max_tokens),
        "messages", "context_length_exceeded"));
  }
}

const char* finish_name(FinishReason r) { return finish_reason_name(r); }

// A chat's finish reason: "tool_calls" when the model stopped on its own after calls were taken.
const char* chat_finish_name(FinishReason r, const Generation& gen) {
  return r == FinishReason::kStop && gen.tool_call_count() > 0 ? "tool_calls" : finish_reason_name(r);
}

// The tool-call format of the served model: the configured one, else the chat template's family's.
ToolCallFormat tool_call_format(const ServerConfig& config, const tokenizer::ChatTemplate& t) {
  if (auto f = parse_tool_call_format(config.tool_call_parser)) return *f;
  return tool_call_format_for_family(tokenizer::template_family_name(t.family()));
}

// State shared by one SSE stream's provider calls.
struct Stream {
  std::shared_ptr<Generation> gen;
  ResponseHead head;
  Scheduler* scheduler = nullptr;
  bool chat = true;
  bool include_usage = false;
  bool logprobs = false;
  bool started = false;
  std::string echo;  // completions with echo: the prompt, sent first
  int64_t text_offset = 0;
};

// Runs one provider call: waits briefly for news and writes it. A keep-alive comment while
// waiting makes a vanished client show up as a failed write, which cancels the request.
bool stream_step(Stream& st, httplib::DataSink& sink) {
  auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
  if (!st.started) {
    st.started = true;
    if (st.chat) {
      if (!write(sse_event(chat_chunk(st.head, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)))) return false;
    } else if (!st.echo.empty()) {
      if (!write(sse_event(text_completion_chunk(st.head, st.echo, nullptr, nullptr, 0)))) return false;
      st.text_offset = static_cast<int64_t>(st.echo.size());
    }
  }
  Generation::Delta d;
  if (!st.gen->wait(d, 500ms)) return write(": keep-alive\n\n");
  const std::vector<TokenLogprob>* lps = st.logprobs && !d.logprobs.empty() ? &d.logprobs : nullptr;
  if (st.chat) {
    // Content and calls in the order of the text: the content up to a call, the call, the rest.
    // Reasoning and log-probabilities travel with the first chunk.
    size_t sent = 0;
    auto send_text = [&](size_t end, bool first) {
      if (end == sent && !(first && (!d.reasoning.empty() || lps))) return true;
      json delta = json::object();
      if (first && !d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
      if (end > sent || !delta.contains("reasoning_content")) delta["content"] = d.content.substr(sent, end - sent);
      sent = end;
      return write(sse_event(chat_chunk(st.head, std::move(delta), nullptr, first ? lps : nullptr)));
    };
    for (size_t i = 0; i < d.tool_calls.size(); ++i) {
      if (!send_text(d.tool_call_at[i], i == 0)) return false;
      // OpenAI's shape: id, type and name first, then the arguments.
      for (auto& delta : tool_call_deltas(d.tool_calls[i])) {
        if (!write(sse_event(chat_chunk(st.head, std::move(delta), nullptr, nullptr)))) return false;
      }
    }
    if (!send_text(d.content.size(), d.tool_calls.empty())) return false;
  }
  if (!st.chat && (!d.content.empty() || lps)) {
    const std::string out = sse_event(text_completion_chunk(st.head, d.content, nullptr, lps, st.text_offset));
    st.text_offset += static_cast<int64_t>(d.content.size());
    if (!write(out)) return false;
  }
  if (!d.finished) return true;
  if (d.reason == FinishReason::kError || d.reason == FinishReason::kAbort) {
    ApiError e;
    e.status = d.reason == FinishReason::kError ? 500 : 503;
    e.type = "server_error";
    e.message = d.reason == FinishReason::kError ? "generation failed: " + d.error : "request aborted: " + d.error;
    if (!write(sse_event(e.to_json()))) return false;
  } else if (st.chat) {
    if (!write(sse_event(chat_chunk(st.head, json::object(), chat_finish_name(d.reason, *st.gen), nullptr)))) {
      return false;
    }
  } else {
    if (!write(sse_event(text_completion_chunk(st.head, "", finish_name(d.reason), nullptr, st.text_offset)))) return false;
  }
  if (st.include_usage) {
    const Usage u = st.gen->usage();
    if (!write(sse_event(st.chat ? chat_usage_chunk(st.head, u) : text_usage_chunk(st.head, u)))) return false;
  }
  if (!write(kSseDone)) return false;
  sink.done();
  return true;
}

// Answers with an SSE stream fed by `gen`.
void start_stream(httplib::Response& res, const ServedModel& m, std::shared_ptr<Generation> gen,
                  const ResponseHead& head, bool chat, bool include_usage, bool logprobs, std::string echo) {
  auto st = std::make_shared<Stream>();
  st->gen = std::move(gen);
  st->head = head;
  st->scheduler = m.scheduler;
  st->chat = chat;
  st->include_usage = include_usage;
  st->logprobs = logprobs;
  st->echo = std::move(echo);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [st](size_t, httplib::DataSink& sink) { return stream_step(*st, sink); },
      [st](bool success) {
        // The client went away (or the write failed): stop generating and free the KV blocks.
        if (!success) st->scheduler->cancel(st->head.id);
      });
}

// Waits for the whole generation (non-streamed responses). While waiting it checks the client's
// connection: a client that went away cancels the request (its KV blocks are freed at the next
// engine iteration), and the abort that follows ends the wait.
Generation::Delta collect(const ServedModel& m, Generation& gen, const httplib::Request& req) {
  const PeerWatch watch(req.remote_addr, req.remote_port, req.local_addr, req.local_port);
  if (!watch.found()) {
    spdlog::warn("no socket found for {}:{} -> {}:{}; a disconnect will not cancel {}",
                 req.remote_addr, req.remote_port, req.local_addr, req.local_port, gen.options().id);
  }
  bool cancelled = false;
  auto next_check = std::chrono::steady_clock::now();
  Generation::Delta all;
  Generation::Delta d;
  while (true) {
    // News arrives with every token, so the connection is checked on a clock, not on timeouts.
    if (!cancelled && std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + 200ms;
      if (watch.peer_closed()) {
        cancelled = true;
        m.scheduler->cancel(gen.options().id);
      }
    }
    if (!gen.wait(d, 200ms)) continue;
    for (size_t i = 0; i < d.tool_calls.size(); ++i) {
      all.tool_call_at.push_back(all.content.size() + d.tool_call_at[i]);
      all.tool_calls.push_back(std::move(d.tool_calls[i]));
    }
    all.content += d.content;
    all.reasoning += d.reasoning;
    for (auto& lp : d.logprobs) all.logprobs.push_back(std::move(lp));
    if (d.finished) {
      all.finished = true;
      all.reason = d.reason;
      all.error = d.error;
      return all;
    }
  }
}

void throw_failed(const Generation::Delta& d) {
  ApiError e;
  e.type = "server_error";
  if (d.reason == FinishReason::kError) {
    e.status = 500;
    e.message = "generation failed: " + d.error;
  } else {
    e.status = 503;
    e.message = "request aborted: " + (d.error.empty() ? std::string("cancelled") : d.error);
  }
  throw ApiException(e);
}

// response_format json_object / json_schema: the request's sampling gets JSON mode's constraint
// (with the request's compiled schema, if any).
// in_reasoning: the output starts inside a thought; the JSON is the content after it.
void apply_response_format(const ServedModel& m, const ResponseFormat& format, bool in_reasoning,
                           SamplingParams& sampling) {
  if (format.type == ResponseFormat::Type::kText) return;
  if (!m.json_mode) {
    throw ApiException(ApiError::invalid("response_format 'json_object' and 'json_schema' are not available for this model",
                                         "response_format", "unsupported"));
  }
  sampling.constraint = std::make_shared<JsonConstraintFactory>(m.json_mode, in_reasoning, format.schema);
}

void submit(const ServedModel& m, const std::shared_ptr<Generation>& gen, std::vector<int32_t> ids,
            const SamplingParams& sampling) {
  GenerationRequest gr;
  gr.id = gen->options().id;
  gr.prompt = std::move(ids);
  gr.sampling = sampling;
  gr.callbacks = gen->callbacks(gen);
  m.scheduler->submit(std::move(gr));
}

}  // namespace

void handle_chat(const ServedModel& m, const ServerConfig& config, Metrics& metrics,
                 const httplib::Request& req, httplib::Response& res) {
  ChatCompletionRequest r = parse_chat_request(req.body);
  check_model(m, r.model);
  check_logit_bias_vocab(r.sampling, m.tokenizer->vocab_size());
  if (!m.chat_template) {
    throw ApiException(ApiError::invalid("this model has no chat template; use /v1/completions", "messages"));
  }
  tokenizer::ChatRenderOptions ropts;
  ropts.add_generation_prompt = true;
  const bool use_tools = r.tool_choice.mode != ToolChoice::Mode::kNone;  // none: not rendered, not parsed
  if (use_tools) ropts.tools = r.tools;
  const std::string prompt = m.chat_template->render(r.messages, ropts);
  std::vector<int32_t> ids = m.tokenizer->encode(prompt, /*add_special=*/false);
  if (r.sampling.max_tokens == 0 && config.default_max_tokens > 0) r.sampling.max_tokens = config.default_max_tokens;
  check_context(m, static_cast<int64_t>(ids.size()), r.sampling.max_tokens);

  GenerationOptions go;
  go.id = make_response_id("chatcmpl-");
  go.stop = r.sampling.stop;
  go.logprobs = r.sampling.logprobs;
  go.split_reasoning = config.reasoning_parser != "none";
  go.starts_in_reasoning = go.split_reasoning && prompt_opens_thinking(prompt);
  if (use_tools) {
    // required and a named function are honoured by the parse only (no constrained decoding):
    // a named choice takes calls of that function alone, the rest stays content.
    go.tool_calls.format = tool_call_format(config, *m.chat_template);
    go.tool_calls.id_prefix = "call_" + go.id.substr(std::string_view("chatcmpl-").size()) + "_";
    if (r.tool_choice.mode == ToolChoice::Mode::kFunction) go.tool_calls.only_name = r.tool_choice.function;
    if (!r.parallel_tool_calls) go.tool_calls.max_calls = 1;
    for (const auto& marker : tool_call_markers(go.tool_calls.format)) {
      const auto id = m.tokenizer->special_token_id(marker);
      if (id && m.tokenizer->is_special(*id)) go.keep_special.push_back(*id);
    }
  }
  go.prompt_tokens = static_cast<int64_t>(ids.size());
  apply_response_format(m, r.response_format, go.starts_in_reasoning, r.sampling);
  auto gen = std::make_shared<Generation>(*m.tokenizer, go, &metrics);
  ResponseHead head{go.id, m.name, static_cast<int64_t>(std::time(nullptr))};
  submit(m, gen, std::move(ids), r.sampling);

  if (r.stream) {
    start_stream(res, m, gen, head, /*chat=*/true, r.include_usage, r.sampling.logprobs, "");
    return;
  }
  Generation::Delta d = collect(m, *gen, req);
  if (d.reason == FinishReason::kError || d.reason == FinishReason::kAbort) throw_failed(d);
  std::optional<std::string> reasoning;
  if (gen->saw_reasoning() || !d.reasoning.empty()) reasoning = d.reasoning;
  res.set_content(chat_completion(head, d.content, reasoning, chat_finish_name(d.reason, *gen), gen->usage(),
                                  r.sampling.logprobs ? &d.logprobs : nullptr, d.tool_calls)
                      .dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

void handle_completion(const ServedModel& m, const ServerConfig& config, Metrics& metrics,
                       const httplib::Request& req, httplib::Response& res) {
  CompletionRequest r = parse_completion_request(req.body);
  // The operator's default, where one is configured, as for chat; OpenAI's 16 otherwise.
  if (!r.max_tokens_given && config.default_max_tokens > 0) r.sampling.max_tokens = config.default_max_tokens;
  check_model(m, r.model);
  check_logit_bias_vocab(r.sampling, m.tokenizer->vocab_size());
  std::vector<int32_t> ids;
  std::string prompt_text = r.prompt;
  if (r.prompt_is_tokens) {
    ids = r.prompt_ids;
    for (int32_t t : ids) {
      if (t >= m.tokenizer->vocab_size()) {
        throw ApiException(ApiError::invalid(fmt::format("token id {} is outside the vocabulary", t), "prompt"));
      }
    }
    if (r.echo) prompt_text = m.tokenizer->decode(ids, false);
  } else {
    ids = m.tokenizer->encode(r.prompt, /*add_special=*/true);
  }
  check_context(m, static_cast<int64_t>(ids.size()), r.sampling.max_tokens);

  GenerationOptions go;
  go.id = make_response_id("cmpl-");
  go.stop = r.sampling.stop;
  go.logprobs = r.sampling.logprobs;
  go.prompt_tokens = static_cast<int64_t>(ids.size());
  apply_response_format(m, r.response_format, /*in_reasoning=*/false, r.sampling);
  auto gen = std::make_shared<Generation>(*m.tokenizer, go, &metrics);
  ResponseHead head{go.id, m.name, static_cast<int64_t>(std::time(nullptr))};
  submit(m, gen, std::move(ids), r.sampling);

  if (r.stream) {
    start_stream(res, m, gen, head, /*chat=*/false, r.include_usage, r.sampling.logprobs,
                 r.echo ? prompt_text : std::string());
    return;
  }
  Generation::Delta d = collect(m, *gen, req);
  if (d.reason == FinishReason::kError || d.reason == FinishReason::kAbort) throw_failed(d);
  const std::string text = r.echo ? prompt_text + d.content : d.content;
  res.set_content(text_completion(head, text, finish_name(d.reason), gen->usage(),
                                  r.sampling.logprobs ? &d.logprobs : nullptr,
                                  r.echo ? static_cast<int64_t>(prompt_text.size()) : 0)
                      .dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

}  // namespace hymoe::server
