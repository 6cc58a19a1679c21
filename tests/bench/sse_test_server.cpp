#include "sse_test_server.h"

#include <httplib.h>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymoe::bench::testing {
namespace {

using nlohmann::json;

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool has_word(const std::vector<std::string>& words, const char* w) {
  for (const auto& x : words)
    if (x == w) return true;
  return false;
}

void busy(std::mutex& engine, int us) {
  std::lock_guard lock(engine);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

std::string event(const json& j) { return "data: " + j.dump() + "\n\n"; }

}  // namespace

TestServer::TestServer(TestServerConfig config)
    : config_(config), server_(std::make_unique<httplib::Server>()) {
  auto& srv = *server_;
  srv.new_task_queue = [] { return new httplib::ThreadPool(16); };
  srv.set_tcp_nodelay(true);  // one SSE event per segment, as a streaming server sends them
  srv.set_keep_alive_timeout(config_.keep_alive_timeout_s);
  auto loading = [this] {
    return std::chrono::steady_clock::now() - started_ <
           std::chrono::milliseconds(config_.ready_after_ms);
  };
  srv.Get("/health", [loading](const httplib::Request&, httplib::Response& res) {
    res.status = loading() ? 503 : 200;
  });
  srv.Get("/v1/models", [loading](const httplib::Request&, httplib::Response& res) {
    if (loading()) {
      res.status = 503;
      return;
    }
    res.set_content(json{{"object", "list"},
                         {"data", {{{"id", "test-model"}, {"root", "test-model"}}}}}
                        .dump(),
                    "application/json");
  });
  srv.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (!config_.tokenize) {
      res.status = 404;
      return;
    }
    const auto body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.contains("prompt") || !body["prompt"].is_string()) {
      res.status = 400;
      return;
    }
    const auto words = words_of(body["prompt"].get<std::string>());
    json tokens = json::array();
    for (std::size_t i = 0; i < words.size(); ++i) tokens.push_back(static_cast<int>(i));
    res.set_content(json{{"tokens", tokens}, {"count", words.size()}}.dump(), "application/json");
  });

  auto complete = [this](const httplib::Request& req, httplib::Response& res, bool chat) {
    ++requests_;
    {
      std::lock_guard lock(ports_mu_);
      ports_.insert(req.remote_port);
    }
    const auto body = json::parse(req.body, nullptr, false);
    std::string prompt;
    int max_tokens = 16;
    if (!body.is_discarded()) {
      if (chat && body.contains("messages") && body["messages"].is_array() &&
          !body["messages"].empty())
        prompt = body["messages"][0].value("content", "");
      if (!chat) prompt = body.value("prompt", "");
      max_tokens = body.value(chat ? "max_completion_tokens" : "max_tokens", 16);
    }
    const auto words = words_of(prompt);
    if (has_word(words, "MISBEHAVE_500")) {
      res.status = 500;
      res.set_content(R"({"error":{"message":"injected failure","type":"server_error",)"
                      R"("param":null,"code":500}})",
                      "application/json");
      return;
    }
    if (has_word(words, "MISBEHAVE_SLOW"))
      std::this_thread::sleep_for(std::chrono::milliseconds(config_.slow_ms));
    const bool include_usage = body.contains("stream_options") &&
                               body["stream_options"].value("include_usage", false);
    const int prompt_tokens = static_cast<int>(words.size());
    const std::string mode = has_word(words, "MISBEHAVE_TRUNCATE")    ? "truncate"
                             : has_word(words, "MISBEHAVE_PARTIAL")   ? "partial"
                             : has_word(words, "MISBEHAVE_NODONE")    ? "nodone"
                             : has_word(words, "MISBEHAVE_MALFORMED") ? "malformed"
                             : has_word(words, "MISBEHAVE_ERROR")     ? "error"
                             : has_word(words, "MISBEHAVE_NOLINE")    ? "noline"
                                                                      : "ok";
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, chat, max_tokens, prompt_tokens, include_usage, mode](std::size_t,
                                                                     httplib::DataSink& sink) {
          ++in_flight_;
          for (int peak = peak_.load(); peak < in_flight_ && !peak_.compare_exchange_weak(peak, in_flight_);) {
          }
          // Leaves the in-flight count before the last event, so a client that has read
          // [DONE] never sees itself counted (idempotent; also runs on early returns).
          struct Leave {
            std::atomic<int>& n;
            bool left = false;
            void operator()() {
              if (!left) --n;
              left = true;
            }
            ~Leave() { (*this)(); }
          } leave{in_flight_};
          auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          busy(engine_, config_.prefill_us_per_token * prompt_tokens);
          if (mode == "noline") {
            const std::string block(64 << 10, 'x');
            if (!send("data: ")) return false;
            for (int i = 0; i < 320; ++i)
              if (!send(block)) return false;  // the client hangs up past its limit
            sink.done();
            return true;
          }
          if (chat) {  // role-only first delta, as OpenAI and vLLM send it
            send(event({{"object", "chat.completion.chunk"},
                        {"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}}}}));
          }
          for (int i = 0; i < max_tokens; ++i) {
            if (i > 0) busy(engine_, config_.token_us);
            if (mode == "truncate" && i == 3) return false;  // drop the connection
            if (mode == "malformed" && i == 2) {
              send("data: this is not json\n\n");
              break;
            }
            if (mode == "error" && i == 2) {
              send(event({{"error", {{"message", "injected stream error"}, {"type", "server_error"}}}}));
              break;
            }
            const std::string text = " w" + std::to_string(i);
            json chunk = chat ? json{{"object", "chat.completion.chunk"},
                                     {"choices", {{{"index", 0}, {"delta", {{"content", text}}}}}}}
                              : json{{"object", "text_completion"},
                                     {"choices", {{{"index", 0}, {"text", text}}}}};
            if (!send(event(chunk))) return false;
          }
          leave();
          if (mode == "partial") {
            send("data: {\"ch");
            sink.done();
            return true;
          }
          if (include_usage && mode == "ok")
            send(event({{"choices", json::array()},
                        {"usage", {{"prompt_tokens", prompt_tokens},
                                   {"completion_tokens", max_tokens},
                                   {"total_tokens", prompt_tokens + max_tokens}}}}));
          if (mode != "nodone") send("data: [DONE]\n\n");
          sink.done();
          return true;
        });
  };
  srv.Post("/v1/completions", [complete](const httplib::Request& q, httplib::Response& r) {
    complete(q, r, false);
  });
  srv.Post("/v1/chat/completions", [complete](const httplib::Request& q, httplib::Response& r) {
    complete(q, r, true);
  });

  port_ = srv.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("test server: cannot bind 127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 5000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!server_->is_running()) throw std::runtime_error("test server: did not start");
}

std::size_t TestServer::completion_connections() const {
  std::lock_guard lock(ports_mu_);
  return ports_.size();
}

TestServer::~TestServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hymoe::bench::testing
