#include "hymoe/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/server/api_error.h"
#include "http_routes.h"

namespace hymoe::server {

using nlohmann::json;

struct HttpServer::Impl {
  const ServerConfig& config;
  Metrics& metrics;
  httplib::Server http;
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

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
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

  // Bodies for errors httplib raises itself (unknown route, body too large, bad request line).
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    if (res.status == 404) {
      e.type = "not_found_error";
      e.message = "no route for " + req.method + " " + req.path;
    } else if (res.status == 413) {
      e.code = "request_too_large";
      e.message = "request body larger than " + std::to_string(config.max_body_bytes) + " bytes";
    } else if (res.status == 405) {
      e.message = "method " + req.method + " not allowed on " + req.path;
    } else {
      e.message = "bad request";
    }
    res.set_content(e.body(), "application/json");
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
    }
    if (e.status >= 500) log::get("server")->error("{} {}: {}", req.method, req.path, e.message);
    write_error(res, e);
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
                              {"max_model_len", m->max_context}}});
    res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
  });

  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res)) handle_chat(*m, config, metrics, req, res);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res)) handle_completion(*m, config, metrics, req, res);
  });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res)) handle_tokenize(*m, req.body, res);
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    if (auto m = ready_or_503(res)) handle_detokenize(*m, req.body, res);
  });
}

void write_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
}

}  // namespace hymoe::server
