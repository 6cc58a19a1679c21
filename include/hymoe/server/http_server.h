// The OpenAI-compatible HTTP front end. cpp-httplib stays behind this interface.
//
// Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health
// (503 while loading or draining, 200 when ready), GET /metrics (Prometheus), POST /tokenize,
// POST /detokenize. Errors are OpenAI-style JSON with a fitting status; one bad request never
// takes the server down. Optional Bearer keys protect /v1/* and /tokenize, /detokenize.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hymoe/scheduler/scheduler.h"
#include "hymoe/server/json_constraint.h"
#include "hymoe/server/metrics.h"
#include "hymoe/server/server_config.h"
#include "hymoe/tokenizer/chat_template.h"
#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::server {

// What the server serves once loading is done. Everything here outlives the server's use of it.
struct ServedModel {
  std::string name;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  const tokenizer::ChatTemplate* chat_template = nullptr;  // null: /v1/chat/completions is refused
  Scheduler* scheduler = nullptr;
  int64_t max_context = 0;
  int64_t created = 0;        // unix seconds, for /v1/models
  std::string backend;        // executor name
  std::string placement;      // the executor's placement_summary() ("" for the CPU engine)
  std::shared_ptr<const JsonModeVocab> json_mode;  // null: response_format json_object is refused
};

class HttpServer {
 public:
  HttpServer(const ServerConfig& config, Metrics& metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds config.host:config.port (0 = a free port); returns the port. Throws hymoe::Error
  // (kUnavailable) when the address cannot be bound.
  int bind();
  // Serves until stop(); call after bind(), typically on its own thread.
  void serve();
  void stop();

  // Ready: /health turns 200 and the generation routes accept requests.
  void set_model(std::shared_ptr<const ServedModel> model);
  // Draining: generation routes answer 503, in-flight streams continue.
  void set_draining();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe::server
