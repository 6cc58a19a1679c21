#include "hymoe/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/server/api_error.h"
#include "hymoe/server/openai_request.h"
#include "http_core.h"
#include "http_routes.h"

namespace hymoe::server {

using nlohmann::json;

namespace {

// Methods whose body httplib reads (detail::expect_content; its framing therefore matters).
bool reads_body(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" || method == "PRI";
}

// Why a request's framing (how its body is delimited) cannot be trusted, or "" when it can.
// The body is not read after such a request, so its answer closes the connection.
std::string framing_problem(const httplib::Request& req, int64_t max_body_bytes, int& status) {
  status = 400;
  const size_t te_count = req.get_header_value_count("Transfer-Encoding");
  const size_t cl_count = req.get_header_value_count("Content-Length");
  if (te_count > 0) {
    std::string te = req.get_header_value("Transfer-Encoding");
    for (auto& c : te) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (te_count > 1 || te != "chunked") return "only 'Transfer-Encoding: chunked' is supported";
    if (cl_count > 0) return "a request must not have both Content-Length and Transfer-Encoding";
    return "";
  }
  std::string length;
  for (size_t i = 0; i < cl_count; ++i) {
    const std::string v = req.get_header_value("Content-Length", i);
    const bool digits = !v.empty() && v.size() <= 18 &&
                        std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return "Content-Length must be a decimal number of bytes";
    if (i > 0 && v != length) return "conflicting Content-Length headers";
    length = v;
  }
  if (cl_count > 0 && std::stoll(length) > max_body_bytes) {
    status = 413;
    return "request body larger than " + std::to_string(max_body_bytes) + " bytes";
  }
  if (reads_body(req.method) && cl_count == 0) {
    status = 411;
    return "a " + req.method + " request needs a Content-Length (or chunked Transfer-Encoding)";
  }
  return "";
}

// The error body, made never to throw: a failure here answers a plain 500.
void write_error_safely(httplib::Response& res, const ApiError& e) noexcept {
  try {
    write_error(res, e);
  } catch (...) {
    res.status = 500;
    res.body = ApiError::kFallbackBody;
    res.set_header("Content-Type", "application/json");
  }
}

}  // namespace

struct HttpServer::Impl {
  const ServerConfig& config;
  Metrics& metrics;
  HttpCore http;
  std::mutex model_mutex;
  std::shared_ptr<const ServedModel> model;
  std::atomic<bool> draining{false};
  std::atomic<int> listen_fd{-1};  // the listening socket, to widen its accept backlog

  Impl(const ServerConfig& c, Metrics& m) : config(c), metrics(m) {}

  std::shared_ptr<const ServedModel> current() {
    std::lock_guard lock(model_mutex);
    return model;
  }

  // The model when generation may proceed; else writes 503 and returns null.
  std::shared_ptr<const ServedModel> ready_or_503(httplib::Response& res) {
    auto m = current();
    if (!m || draining) {
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.message = draining ? "the server is shutting down" : "the model is still loading";
      write_error(res, e);
      return nullptr;
    }
    return m;
  }

  // httplib bounds Content-Length bodies; a chunked body is checked here once read.
  bool body_fits(const httplib::Request& req, httplib::Response& res) const {
    if (static_cast<int64_t>(req.body.size()) <= config.max_body_bytes) return true;
    ApiError e;
    e.status = 413;
    e.code = "request_too_large";
    e.message = "request body larger than " + std::to_string(config.max_body_bytes) + " bytes";
    write_error(res, e);
    return false;
  }

  bool authorised(const httplib::Request& req) const {
    if (config.api_keys.empty()) return true;
    const std::string auth = req.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (!std::string_view(auth).starts_with(kBearer)) return false;
    const std::string_view key = std::string_view(auth).substr(kBearer.size());
    bool ok = false;
    for (const auto& k : config.api_keys) {
      // Constant-time over the candidate's length.
      unsigned diff = static_cast<unsigned>(k.size() ^ key.size());
      for (size_t i = 0; i < k.size(); ++i) diff |= static_cast<unsigned>(k[i] ^ (i < key.size() ? key[i] : 0));
      ok = ok || diff == 0;
    }
    return ok;
  }

  void add_cors(const httplib::Request& req, httplib::Response& res) const {
    if (config.cors_origins.empty()) return;
    const std::string origin = req.get_header_value("Origin");
    for (const auto& allowed : config.cors_origins) {
      if (allowed == "*" || allowed == origin) {
        res.set_header("Access-Control-Allow-Origin", allowed == "*" ? "*" : origin);
        res.set_header("Vary", "Origin");
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        return;
      }
    }
  }

  void routes();
};

HttpServer::HttpServer(const ServerConfig& config, Metrics& metrics) : impl_(std::make_unique<Impl>(config, metrics)) {
  impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  int port = 0;
  if (impl_->config.port == 0) {
    port = impl_->http.bind_to_any_port(impl_->config.host);
  } else {
    port = impl_->http.bind_to_port(impl_->config.host, impl_->config.port) ? impl_->config.port : -1;
  }
  HYMOE_CHECK(port > 0, kUnavailable, "cannot listen on {}:{} (address in use or not available)", impl_->config.host,
              impl_->config.port);
  // Debian's compiled cpp-httplib listens with a backlog of 5, so a burst of new connections
  // overflows the accept queue; listen() again on the bound socket raises it (Linux).
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, SOMAXCONN);
  return port;
}

void HttpServer::serve() { impl_->http.listen_after_bind(); }

void HttpServer::stop() {
  if (impl_->http.is_running()) impl_->http.stop();
}

void HttpServer::set_model(std::shared_ptr<const ServedModel> model) {
  std::lock_guard lock(impl_->model_mutex);
  impl_->model = std::move(model);
}

void HttpServer::set_draining() { impl_->draining = true; }

void HttpServer::Impl::routes() {
  const int threads = config.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(static_cast<size_t>(config.max_body_bytes));
  // Line and headers plus a chunked body's framing fit in the slack.
  http.set_request_byte_budget(2 * static_cast<size_t>(config.max_body_bytes) + (1u << 20));
  // Replaces httplib's default socket options (SO_REUSEADDR kept; no SO_REUSEPORT, so a second
  // server on the same port fails to bind instead of sharing it) and remembers the socket.
  http.set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = static_cast<int>(sock);
  });
  http.set_read_timeout(60, 0);
  http.set_write_timeout(60, 0);
  http.set_keep_alive_max_count(1000);

  // Answers a request whose framing cannot be trusted (true) before its body is read; the
  // connection then closes, since the body was not read.
  auto refuse_framing = [this](const httplib::Request& req, httplib::Response& res) {
    int status = 400;
    const std::string problem = framing_problem(req, config.max_body_bytes, status);
    if (problem.empty()) return false;
    ApiError e;
    e.status = status;
    e.code = status == 413 ? "request_too_large" : "invalid_framing";
    e.message = problem;
    write_error_safely(res, e);
    HttpCore::close_after(res);
    return true;
  };
  // `Expect: 100-continue` is answered before routing: a final answer instead of 100 where the
  // framing is refused, so the client does not send a body that will not be read.
  http.set_expect_100_continue_handler([refuse_framing](const httplib::Request& req, httplib::Response& res) {
    return refuse_framing(req, res) ? res.status : 100;
  });

  http.set_pre_routing_handler([this, refuse_framing](const httplib::Request& req, httplib::Response& res) {
    if (refuse_framing(req, res)) return httplib::Server::HandlerResponse::Handled;
    // A body where none is read (GET with Content-Length): what follows cannot be trusted.
    if (!reads_body(req.method) && (req.has_header("Transfer-Encoding") ||
                        (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0"))) {
      HttpCore::close_after(res);
    }
    add_cors(req, res);
    if (req.method == "OPTIONS") {
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool protected_path = req.path.starts_with("/v1/") || req.path == "/tokenize" || req.path == "/detokenize";
    if (protected_path && !authorised(req)) {
      ApiError e;
      e.status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      e.message = "missing or invalid API key (Authorization: Bearer <key>)";
      write_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Bodies for errors httplib raises itself (unknown route, body too large, bad request line or
  // framing). Client bytes in the message are made valid UTF-8 (ApiError::to_json) and nothing
  // here may throw: httplib calls this outside its exception handling.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    try {
      ApiError e;
      if (HttpCore::request_over_budget()) res.status = 413;
      e.status = res.status;
      if (res.status == 404) {
        e.type = "not_found_error";
        e.message = "no route for " + req.method + " " + req.path;
      } else if (res.status == 413) {
        e.code = "request_too_large";
        e.message = "request larger than " + std::to_string(config.max_body_bytes) + " bytes";
      } else if (res.status == 405) {
        e.message = "method " + req.method + " not allowed on " + req.path;
      } else if (res.status >= 500) {
        e.type = "server_error";
        e.message = "internal error";
      } else if (const char* problem = HttpCore::body_problem()) {
        e.code = "invalid_framing";
        e.message = std::string("invalid request body: ") + problem;
      } else {
        e.message = "bad request (malformed request line, headers or body framing)";
      }
      if (res.status != 404 && res.status != 405) HttpCore::close_after(res);  // the stream may be out of step
      res.set_content(e.body(), "application/json");
    } catch (...) {
      res.status = 500;
      res.body = ApiError::kFallbackBody;
      HttpCore::close_after(res);
    }
  });

  http.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    HttpCore::tidy_connection_headers(res);
  });

  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    ApiError e;
    try {
      std::rethrow_exception(ep);
    } catch (const ApiException& a) {
      e = a.error();
    } catch (const Error& err) {
      e = ApiError::from(err);
    } catch (const std::exception& ex) {
      e.status = 500;
      e.type = "server_error";
      e.message = ex.what();
    } catch (...) {
      e.status = 500;
      e.type = "server_error";
      e.message = "unknown error";
    }
    if (e.status >= 500) {
      try {
        log::get("server")->error("{} {}: {}", to_valid_utf8(req.method), to_valid_utf8(req.path),
                                  to_valid_utf8(e.message));
      } catch (...) {
      }
    }
    write_error_safely(res, e);
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    auto m = current();
    if (!m || draining) {
      res.status = 503;
      res.set_content(json{{"status", draining ? "draining" : "loading"}}.dump(), "application/json");
      return;
    }
    res.set_content(json{{"status", "ok"}}.dump(), "application/json");
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4");
  });

  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    auto m = ready_or_503(res);
    if (!m) return;
    json data = json::array({{{"id", m->name},
                              {"object", "model"},
                              {"created", m->created},
                              {"owned_by", "hymoe"},
                              {"root", m->name},
                              {"max_model_len", m->max_context},
                              {"backend", m->backend}}});
    if (!m->placement.empty()) data[0]["placement"] = m->placement;
    res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
  });

  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res); m && body_fits(req, res)) handle_chat(*m, config, metrics, req, res);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res); m && body_fits(req, res)) handle_completion(*m, config, metrics, req, res);
  });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res); m && body_fits(req, res)) handle_tokenize(*m, req.body, res);
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res); m && body_fits(req, res)) handle_detokenize(*m, req.body, res);
  });
}

void write_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
}

}  // namespace hymoe::server
