// A small OpenAI-compatible SSE server for hymoe-bench's integration tests: loopback only, on an
// ephemeral port, streaming one word per chunk with delays, and misbehaving on request.
//
// Endpoints: GET /health, GET /v1/models, POST /tokenize (one token per whitespace-separated word),
// POST /v1/completions and /v1/chat/completions (stream only; stream_options.include_usage
// adds a usage chunk). The prompt's word count is its token count.
//
// Timing model: one "engine" lock. A prefill holds it for prefill_us_per_token per prompt word;
// each decode step holds it for token_us. So a long prefill stalls decoding, as on a real
// server without chunked prefill, and the scenario test can see the interference.
//
// Misbehaviour, chosen by a word in the prompt:
//   MISBEHAVE_500        HTTP 500 with an OpenAI error body
//   MISBEHAVE_TRUNCATE   stops after 3 chunks and drops the connection (chunked body cut)
//   MISBEHAVE_PARTIAL    ends the stream cleanly in the middle of an event ("data: {\"ch")
//   MISBEHAVE_NODONE     ends the stream cleanly after all tokens but without data: [DONE]
//   MISBEHAVE_MALFORMED  sends "data: this is not json" after 2 tokens
//   MISBEHAVE_ERROR      sends an {"error": {...}} event after 2 tokens
//   MISBEHAVE_SLOW       sleeps slow_ms before the first byte of the response
//   MISBEHAVE_NOLINE     sends "data: " and then 20 MiB without a line end
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace httplib {
class Server;
}

namespace hymoe::bench::testing {

struct TestServerConfig {
  int token_us = 2000;              // per decode step
  int prefill_us_per_token = 20;    // per prompt word
  int slow_ms = 3000;               // MISBEHAVE_SLOW
  bool tokenize = true;             // serve /tokenize
  int ready_after_ms = 0;           // /health and /v1/models answer 503 until then ("loading")
  int keep_alive_timeout_s = 5;     // idle kept-alive connections are closed after this
};

class TestServer {
 public:
  explicit TestServer(TestServerConfig config);
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  int port() const { return port_; }
  // Completion requests received so far.
  int requests() const { return requests_.load(); }
  // The largest number of completion requests in flight at once.
  int peak_in_flight() const { return peak_.load(); }
  // Distinct client connections (remote ports) that completion requests came over.
  std::size_t completion_connections() const;

 private:
  TestServerConfig config_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex engine_;
  mutable std::mutex ports_mu_;
  std::set<int> ports_;
  std::atomic<int> requests_{0}, in_flight_{0}, peak_{0};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace hymoe::bench::testing
