// POST /v1/chat/completions and /v1/completions, streamed (SSE) and not.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "hymoe/common/error.h"
#include "hymoe/server/api_error.h"
#include "hymoe/server/generation.h"
#include "hymoe/server/http_server.h"
#include "hymoe/server/json_constraint.h"
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

// The n choices of one request (issue 45), each its own sequence and Generation. Choice 0 goes
// to the scheduler at once; the others wait until it has its first token, when its prompt's KV
// blocks are in the prefix cache, so they take those blocks instead of computing the prompt
// again. Choice i > 0 has the request id + "-i" and, when the request gives a seed, seed + i.
struct Choices {
  std::vector<std::shared_ptr<Generation>> gens;
  std::vector<GenerationRequest> held;           // choices 1..n-1 until choice 0's prompt is cached
  std::shared_ptr<std::atomic<bool>> prefilled;  // choice 0 had its first token (or ended)
  Scheduler* scheduler = nullptr;

  // Submits the held choices once choice 0's prompt is cached. True when none is held.
  bool release() {
    if (held.empty()) return true;
    if (!prefilled->load()) return false;
    for (auto& gr : held) scheduler->submit(std::move(gr));
    held.clear();
    return true;
  }
  // Cancels every submitted choice and drops the held ones.
  void cancel() {
    held.clear();
    for (const auto& g : gens) scheduler->cancel(g->options().id);
  }
  // Usage as OpenAI counts it: the prompt once, the completions summed.
  Usage usage() const {
    Usage u = gens[0]->usage();
    for (size_t i = 1; i < gens.size(); ++i) u.completion_tokens += gens[i]->usage().completion_tokens;
    return u;
  }
};

Choices start_choices(const ServedModel& m, Metrics& metrics, const GenerationOptions& options,
                      std::vector<int32_t> ids, const SamplingParams& sampling, int32_t n) {
  Choices c;
  c.scheduler = m.scheduler;
  c.prefilled = std::make_shared<std::atomic<bool>>(n == 1);
  for (int32_t i = 0; i < n; ++i) {
    GenerationOptions go = options;
    if (i > 0) {
      go.id = fmt::format("{}-{}", options.id, i);
      if (!go.tool_calls.id_prefix.empty()) go.tool_calls.id_prefix += std::to_string(i) + "_";
    }
    auto gen = std::make_shared<Generation>(*m.tokenizer, go, &metrics);
    GenerationRequest gr;
    gr.id = go.id;
    if (i + 1 < n) gr.prompt = ids;
    else gr.prompt = std::move(ids);
    gr.sampling = sampling;
    if (sampling.seed && i > 0) gr.sampling.seed = *sampling.seed + static_cast<uint64_t>(i);
    gr.callbacks = gen->callbacks(gen);
    if (i == 0 && n > 1) {
      auto on_token = std::move(gr.callbacks.on_token);
      auto on_finish = std::move(gr.callbacks.on_finish);
      gr.callbacks.on_token = [flag = c.prefilled, on_token](const TokenOutput& t) {
        flag->store(true);
        return on_token(t);
      };
      gr.callbacks.on_finish = [flag = c.prefilled, on_finish](FinishReason r, const std::string& e) {
        flag->store(true);
        on_finish(r, e);
      };
    }
    c.gens.push_back(std::move(gen));
    if (i == 0) m.scheduler->submit(std::move(gr));
    else c.held.push_back(std::move(gr));
  }
  return c;
}

// A chunk of choice i (the builders write index 0).
json indexed(json chunk, size_t i) {
  if (i > 0 && chunk.contains("choices") && !chunk["choices"].empty()) chunk["choices"][0]["index"] = i;
  return chunk;
}

// State shared by one SSE stream's provider calls.
struct Stream {
  Choices choices;
  ResponseHead head;
  bool chat = true;
  bool include_usage = false;
  bool logprobs = false;
  bool started = false;
  std::string echo;  // completions with echo: the prompt, sent first
  std::vector<int64_t> text_offset;  // per choice
  std::vector<uint8_t> done;         // per choice: its last chunk was sent
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
};

// Writes what choice i's delta holds; its finish chunk when it finished. False on a failed write.
bool stream_delta(Stream& st, size_t i, Generation::Delta& d, httplib::DataSink& sink) {
  auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
  const Generation& gen = *st.choices.gens[i];
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
      return write(sse_event(indexed(chat_chunk(st.head, std::move(delta), nullptr, first ? lps : nullptr), i)));
    };
    for (size_t k = 0; k < d.tool_calls.size(); ++k) {
      if (!send_text(d.tool_call_at[k], k == 0)) return false;
      // OpenAI's shape: id, type and name first, then the arguments.
      for (auto& delta : tool_call_deltas(d.tool_calls[k])) {
        if (!write(sse_event(indexed(chat_chunk(st.head, std::move(delta), nullptr, nullptr), i)))) return false;
      }
    }
    if (!send_text(d.content.size(), d.tool_calls.empty())) return false;
  }
  if (!st.chat && (!d.content.empty() || lps)) {
    const std::string out = sse_event(indexed(text_completion_chunk(st.head, d.content, nullptr, lps, st.text_offset[i]), i));
    st.text_offset[i] += static_cast<int64_t>(d.content.size());
    if (!write(out)) return false;
  }
  if (!d.finished || d.reason == FinishReason::kError || d.reason == FinishReason::kAbort) return true;
  if (st.chat) return write(sse_event(indexed(chat_chunk(st.head, json::object(), chat_finish_name(d.reason, gen), nullptr), i)));
  return write(sse_event(indexed(text_completion_chunk(st.head, "", finish_name(d.reason), nullptr, st.text_offset[i]), i)));
}

// Runs one provider call: waits briefly for news of any choice and writes it. A keep-alive
// comment after 500 ms without news makes a vanished client show up as a failed write, which
// cancels the request.
bool stream_step(Stream& st, httplib::DataSink& sink) {
  auto write = [&sink, &st](const std::string& s) {
    st.last_write = std::chrono::steady_clock::now();
    return sink.write(s.data(), s.size());
  };
  const size_t n = st.choices.gens.size();
  if (!st.started) {
    st.started = true;
    for (size_t i = 0; i < n; ++i) {
      if (st.chat) {
        if (!write(sse_event(indexed(chat_chunk(st.head, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr), i)))) {
          return false;
        }
      } else if (!st.echo.empty()) {
        if (!write(sse_event(indexed(text_completion_chunk(st.head, st.echo, nullptr, nullptr, 0), i)))) return false;
        st.text_offset[i] = static_cast<int64_t>(st.echo.size());
      }
    }
  }
  try {
    st.choices.release();
  } catch (const Error& e) {  // the scheduler refused them (e.g. shutting down): the request fails
    st.choices.cancel();
    if (!write(sse_event(ApiError::from(e).to_json()))) return false;
    if (!write(kSseDone)) return false;
    sink.done();
    return true;
  }
  // One choice waits up to 500 ms; several take turns in short slices.
  const auto slice = n == 1 ? 500ms : 20ms;
  bool news = false;
  for (size_t i = 0; i < n; ++i) {
    if (st.done[i]) continue;
    Generation::Delta d;
    if (!st.choices.gens[i]->wait(d, news ? 0ms : slice)) continue;
    news = true;
    if (!stream_delta(st, i, d, sink)) return false;
    st.last_write = std::chrono::steady_clock::now();
    if (!d.finished) continue;
    st.done[i] = 1;
    if (d.reason == FinishReason::kError || d.reason == FinishReason::kAbort) {
      // One failed choice fails the request: the others stop, the stream ends with the error.
      st.choices.cancel();
      ApiError e;
      e.status = d.reason == FinishReason::kError ? 500 : 503;
      e.type = "server_error";
      e.message = d.reason == FinishReason::kError ? "generation failed: " + d.error : "request aborted: " + d.error;
      if (!write(sse_event(e.to_json()))) return false;
      if (!write(kSseDone)) return false;
      sink.done();
      return true;
    }
  }
  if (!news) {
    if (std::chrono::steady_clock::now() - st.last_write < 500ms) return true;
    return write(": keep-alive\n\n");
  }
  if (std::find(st.done.begin(), st.done.end(), 0) != st.done.end()) return true;
  if (st.include_usage) {
    const Usage u = st.choices.usage();
    if (!write(sse_event(st.chat ? chat_usage_chunk(st.head, u) : text_usage_chunk(st.head, u)))) return false;
  }
  if (!write(kSseDone)) return false;
  sink.done();
  return true;
}

// Answers with an SSE stream fed by the choices.
void start_stream(httplib::Response& res, Choices choices, const ResponseHead& head, bool chat, bool include_usage,
                  bool logprobs, std::string echo) {
  auto st = std::make_shared<Stream>();
  const size_t n = choices.gens.size();
  st->choices = std::move(choices);
  st->head = head;
  st->chat = chat;
  st->include_usage = include_usage;
  st->logprobs = logprobs;
  st->echo = std::move(echo);
  st->text_offset.assign(n, 0);
  st->done.assign(n, 0);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [st](size_t, httplib::DataSink& sink) { return stream_step(*st, sink); },
      [st](bool success) {
        // The client went away (or the write failed): stop generating and free the KV blocks.
        if (!success) st->choices.cancel();
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

// tool_choice required / a named function: the output is forced to be tool calls in the model's
// format (tool_call_grammar). Not forced where the model has no tool-call format or no JSON mode
// tables: the parse alone then honours the choice, as with auto.
void apply_forced_tools(const ServedModel& m, const ToolChoice& choice, const ToolCallParserOptions& parse,
                        bool in_reasoning, SamplingParams& sampling) {
  if (choice.forced.empty() || parse.format == ToolCallFormat::kNone || !m.json_mode) return;
  std::vector<ForcedTool> tools;
  for (const auto& f : choice.forced) tools.push_back({f.name, f.parameters});
  const auto token_of = [&](std::string_view marker) -> std::optional<int32_t> {
    const auto id = m.tokenizer->special_token_id(marker);
    if (id && *id >= 0 && *id < m.tokenizer->vocab_size()) return static_cast<int32_t>(*id);
    return std::nullopt;
  };
  sampling.constraint = std::make_shared<JsonSequenceConstraintFactory>(
      m.json_mode, in_reasoning, tool_call_grammar(parse.format, tools, parse.max_calls, token_of));
}

// Collects every choice (non-streamed responses): held choices are released as soon as choice
// 0's prompt is cached, then each is read to its end. A failed choice cancels the others and
// fails the request.
std::vector<Generation::Delta> collect_all(const ServedModel& m, Choices& c, const httplib::Request& req) {
  try {
    while (!c.release()) std::this_thread::sleep_for(2ms);  // choice 0's prefill: it ends, so this does
  } catch (...) {
    c.cancel();
    throw;
  }
  std::vector<Generation::Delta> out;
  for (const auto& gen : c.gens) {
    out.push_back(collect(m, *gen, req));
    const auto& d = out.back();
    if (d.reason == FinishReason::kError || d.reason == FinishReason::kAbort) {
      c.cancel();
      throw_failed(d);
    }
  }
  return out;
}

// The choices of a non-streamed response: choice 0's body with every choice, indexed.
json with_choices(json body, std::vector<json> more) {
  for (size_t i = 0; i < more.size(); ++i) {
    json choice = std::move(more[i]["choices"][0]);
    choice["index"] = i + 1;
    body["choices"].push_back(std::move(choice));
  }
  return body;
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
    // required and a named function: forced by constrained decoding (apply_forced_tools), and a
    // named choice's parse takes calls of that function alone.
    go.tool_calls.format = tool_call_format(config, *m.chat_template);
    go.tool_calls.id_prefix = "call_" + go.id.substr(std::string_view("chatcmpl-").size()) + "_";
    if (r.tool_choice.mode == ToolChoice::Mode::kFunction) go.tool_calls.only_name = r.tool_choice.function;
    if (!r.parallel_tool_calls) go.tool_calls.max_calls = 1;
    go.tool_calls.first_call_index = count_tool_calls(r.messages);  // Kimi-K2's call counter
    for (const auto& marker : tool_call_markers(go.tool_calls.format)) {
      const auto id = m.tokenizer->special_token_id(marker);
      if (id && m.tokenizer->is_special(*id)) go.keep_special.push_back(*id);
    }
  }
  go.prompt_tokens = static_cast<int64_t>(ids.size());
  apply_response_format(m, r.response_format, go.starts_in_reasoning, r.sampling);
  apply_forced_tools(m, r.tool_choice, go.tool_calls, go.starts_in_reasoning, r.sampling);
  ResponseHead head{go.id, m.name, static_cast<int64_t>(std::time(nullptr))};
  Choices choices = start_choices(m, metrics, go, std::move(ids), r.sampling, r.n);

  if (r.stream) {
    start_stream(res, std::move(choices), head, /*chat=*/true, r.include_usage, r.sampling.logprobs, "");
    return;
  }
  std::vector<Generation::Delta> ds = collect_all(m, choices, req);
  const Usage usage = choices.usage();
  std::vector<json> bodies;
  for (size_t i = 0; i < ds.size(); ++i) {
    const Generation& gen = *choices.gens[i];
    std::optional<std::string> reasoning;
    if (gen.saw_reasoning() || !ds[i].reasoning.empty()) reasoning = ds[i].reasoning;
    bodies.push_back(chat_completion(head, ds[i].content, reasoning, chat_finish_name(ds[i].reason, gen), usage,
                                     r.sampling.logprobs ? &ds[i].logprobs : nullptr, ds[i].tool_calls));
  }
  json body = std::move(bodies[0]);
  bodies.erase(bodies.begin());
  res.set_content(with_choices(std::move(body), std::move(bodies)).dump(-1, ' ', false, json::error_handler_t::replace),
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
  ResponseHead head{go.id, m.name, static_cast<int64_t>(std::time(nullptr))};
  Choices choices = start_choices(m, metrics, go, std::move(ids), r.sampling, r.n);

  if (r.stream) {
    start_stream(res, std::move(choices), head, /*chat=*/false, r.include_usage, r.sampling.logprobs,
                 r.echo ? prompt_text : std::string());
    return;
  }
  std::vector<Generation::Delta> ds = collect_all(m, choices, req);
  const Usage usage = choices.usage();
  std::vector<json> bodies;
  for (const auto& d : ds) {
    const std::string text = r.echo ? prompt_text + d.content : d.content;
    bodies.push_back(text_completion(head, text, finish_name(d.reason), usage, r.sampling.logprobs ? &d.logprobs : nullptr,
                                     r.echo ? static_cast<int64_t>(prompt_text.size()) : 0));
  }
  json body = std::move(bodies[0]);
  bodies.erase(bodies.begin());
  res.set_content(with_choices(std::move(body), std::move(bodies)).dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

}  // namespace hymoe::server
