// A streaming client for one OpenAI-compatible endpoint (/v1/completions or
// /v1/chat/completions): sends one request, timestamps every SSE chunk that carries text, and
// turns every failure (refused connection, timeout, HTTP error, malformed or truncated stream,
// an error object in the stream) into a RequestOutput with success = false and the reason.
// send() never throws; it is safe to call from many threads at once (one connection each).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Client;
}

namespace hymoe::bench {

using Clock = std::chrono::steady_clock;

enum class Api { kCompletions, kChat };

struct EndpointConfig {
  std::string base_url = "http://127.0.0.1:8000";  // scheme://host[:port][/prefix]
  std::string endpoint = "/v1/completions";        // appended to base_url
  Api api = Api::kCompletions;
  std::string model;  // "model" of every request
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  double timeout_s = 3600;        // whole request, first byte to last
  double connect_timeout_s = 10;  // TCP connect
  bool ignore_eos = false;        // sends "ignore_eos": true (vLLM/SGLang/hymoe extension)
  // vLLM's timing: a chunk with "choices" counts as a token even when its text is empty (the
  // chat API's role-only first chunk). Default: only chunks carrying text count.
  bool count_empty_chunks = false;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every body (wins)
};

struct RequestInput {
  std::string prompt;
  int prompt_len = 0;  // tokens, as reported in input_lens
  int output_len = 0;  // max_tokens
};

// What happened to one request, in vLLM's RequestFuncOutput terms. Times are seconds; start_time
// and token_times are measured from the benchmark's start instant.
struct RequestOutput {
  bool success = false;
  std::string error;            // empty on success
  int http_status = 0;          // 0: no HTTP response
  double start_time = 0;        // when the request was sent
  double client_queue_time = 0; // start_time - scheduled arrival (max-concurrency wait)
  double ttft = 0;              // first text chunk - start
  std::vector<double> itl;      // gaps between consecutive text chunks
  std::vector<double> token_times;  // arrival of every text chunk
  double latency = 0;           // last chunk - start (E2E)
  int prompt_len = 0;
  int output_tokens = 0;        // usage.completion_tokens, else the number of text chunks
  std::optional<long long> server_prompt_tokens;  // usage.prompt_tokens when reported
  std::string generated_text;
};

// A kept-alive connection that one thread reuses across its requests (as vLLM's aiohttp
// connector does), so TTFT does not pay a TCP connect per request. Dropped after a failure.
class Connection {
 public:
  Connection();
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

 private:
  friend class OpenAiClient;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class OpenAiClient {
 public:
  // t0: the benchmark's start instant for start_time/token_times.
  // Throws hymoe::Error (kInvalidArgument) for a base URL it cannot use.
  OpenAiClient(EndpointConfig config, Clock::time_point t0);

  const EndpointConfig& config() const { return config_; }
  Clock::time_point t0() const { return t0_; }

  // The JSON body send() posts for this input.
  nlohmann::json request_body(const RequestInput& input) const;

  // Streams one request. on_first_token, when set, runs on the calling thread as the first text
  // chunk arrives (scenarios use it to start the next phase).
  // With `connection`, the request goes over that kept-alive connection (opened on first use);
  // a request that fails before any response byte on a reused connection (the server closed
  // it while idle) is retried once on a fresh one.
  RequestOutput send(const RequestInput& input,
                     const std::function<void()>& on_first_token = {},
                     Connection* connection = nullptr) const;

  // GET /v1/models: the first model id, or nullopt with `error` set.
  std::optional<std::string> first_model(std::string* error) const;

  // Polls GET /health, then GET /v1/models, until one answers 200 or timeout_s passes (a server
  // loading its weights answers 503 or refuses connections). True when ready.
  bool wait_ready(double timeout_s) const;

  // POST /tokenize {"model", "prompt", "add_special_tokens": false} -> the token count, or
  // nullopt when the server has no usable /tokenize.
  std::optional<int> count_tokens(const std::string& text) const;

 private:
  // One attempt over `cli`.
  RequestOutput send_once(const RequestInput& input, const std::function<void()>& on_first_token,
                          httplib::Client& cli) const;

  std::string host_;    // scheme://host:port for httplib
  std::string prefix_;  // path prefix of base_url ("" or "/api")
  EndpointConfig config_;
  Clock::time_point t0_;
};

}  // namespace hymoe::bench
