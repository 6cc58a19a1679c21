#include "client.h"

#include <httplib.h>

#include <cmath>
#include <thread>

#include "hymoe/common/error.h"
#include "sse.h"

namespace hymoe::bench {
namespace {

// A server that never ends a line must not grow the harness's memory without bound.
constexpr std::size_t kMaxPendingSse = 16u << 20;

double seconds_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

void set_timeouts(httplib::Client& cli, double connect_s, double read) {
  const auto split = [](double s) {
    const auto sec = static_cast<time_t>(std::floor(s));
    return std::pair<time_t, time_t>{sec, static_cast<time_t>((s - sec) * 1e6)};
  };
  const auto [cs, cus] = split(connect_s);
  cli.set_connection_timeout(cs, cus);
  const auto [rs, rus] = split(read);
  cli.set_read_timeout(rs, rus);
  cli.set_write_timeout(rs, rus);
}

// httplib's error names are terse ("Connection", "Read"); say what they mean for a benchmark.
std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "connection failed (refused or unreachable)";
    case httplib::Error::ConnectionTimeout: return "connect timed out";
    case httplib::Error::Read: return "read failed (connection closed, or timed out)";
    case httplib::Error::Write: return "write failed";
    case httplib::Error::Canceled: return "canceled";
    default: return httplib::to_string(e);
  }
}

httplib::Headers to_headers(const EndpointConfig& c) {
  httplib::Headers h;
  for (const auto& [k, v] : c.headers) h.emplace(k, v);
  return h;
}

}  // namespace

OpenAiClient::OpenAiClient(EndpointConfig config, Clock::time_point t0)
    : config_(std::move(config)), t0_(t0) {
  const std::string& url = config_.base_url;
  const auto scheme_end = url.find("://");
  HYMOE_CHECK(scheme_end != std::string::npos, kInvalidArgument,
              "--base-url must look like http://host:port, got \"{}\"", url);
  const std::string scheme = url.substr(0, scheme_end);
  HYMOE_CHECK(scheme == "http" || scheme == "https", kInvalidArgument,
              "--base-url: unsupported scheme \"{}\"", scheme);
  const auto path_start = url.find('/', scheme_end + 3);
  host_ = url.substr(0, path_start);
  prefix_ = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  HYMOE_CHECK(host_.size() > scheme_end + 3, kInvalidArgument, "--base-url has no host: \"{}\"",
              url);
  HYMOE_CHECK(config_.timeout_s > 0 && config_.connect_timeout_s > 0, kInvalidArgument,
              "timeouts must be positive");
  HYMOE_CHECK(config_.extra_body.is_object(), kInvalidArgument, "--extra-body must be an object");
}

nlohmann::json OpenAiClient::request_body(const RequestInput& in) const {
  nlohmann::json body = {{"model", config_.model}, {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (config_.api == Api::kChat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", in.prompt}}});
    body["max_completion_tokens"] = in.output_len;
  } else {
    body["prompt"] = in.prompt;
    body["max_tokens"] = in.output_len;
  }
  if (config_.ignore_eos) body["ignore_eos"] = true;
  for (const auto& [k, v] : config_.extra_body.items()) body[k] = v;
  return body;
}

struct Connection::Impl {
  std::unique_ptr<httplib::Client> client;
  bool used = false;  // a request went over it already
};

Connection::Connection() : impl_(std::make_unique<Impl>()) {}
Connection::~Connection() = default;

RequestOutput OpenAiClient::send(const RequestInput& in,
                                 const std::function<void()>& on_first_token,
                                 Connection* connection) const {
  auto fresh = [&] {
    auto cli = std::make_unique<httplib::Client>(host_);
    set_timeouts(*cli, config_.connect_timeout_s, config_.timeout_s);
    cli->set_tcp_nodelay(true);
    cli->set_keep_alive(connection != nullptr);
    return cli;
  };
  try {
    if (!connection) {
      auto cli = fresh();
      return send_once(in, on_first_token, *cli);
    }
    auto& c = *connection->impl_;
    const bool reused = c.client && c.used;
    if (!c.client) c.client = fresh();
    c.used = true;
    RequestOutput out = send_once(in, on_first_token, *c.client);
    if (!out.success && reused && out.http_status == 0 && out.token_times.empty()) {
      c.client = fresh();  // a stale kept-alive connection: retry once on a new one
      out = send_once(in, on_first_token, *c.client);
    }
    if (!out.success) c.client.reset();
    return out;
  } catch (const std::exception& e) {
    RequestOutput out;
    out.prompt_len = in.prompt_len;
    out.error = std::string("client exception: ") + e.what();
    if (connection) connection->impl_->client.reset();
    return out;
  }
}

RequestOutput OpenAiClient::send_once(const RequestInput& in,
                                      const std::function<void()>& on_first_token,
                                      httplib::Client& cli) const {
  RequestOutput out;
  out.prompt_len = in.prompt_len;
  const auto start = Clock::now();
  out.start_time = seconds_since(t0_, start);
  try {
    if (!cli.is_valid()) {
      out.error = "cannot use base URL " + config_.base_url + " (https needs an SSL build)";
      return out;
    }

    SseParser parser;
    std::string error_body;  // body of a non-200 response
    bool done = false;
    bool failed_in_stream = false;
    int text_chunks = 0;
    std::optional<long long> usage_tokens;
    Clock::time_point last = start;
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(config_.timeout_s));

    auto on_event = [&](const SseEvent& ev) {
      const auto now = Clock::now();
      StreamChunk chunk = decode_openai_chunk(ev.data);
      if (chunk.kind == StreamChunk::Kind::kEmpty && chunk.has_choices &&
          config_.count_empty_chunks)
        chunk.kind = StreamChunk::Kind::kToken;
      switch (chunk.kind) {
        case StreamChunk::Kind::kDone:
          done = true;
          return false;
        case StreamChunk::Kind::kError:
        case StreamChunk::Kind::kMalformed:
          out.error = std::move(chunk.error);
          failed_in_stream = true;
          return false;
        case StreamChunk::Kind::kToken:
          if (done) break;  // text after [DONE] is ignored
          if (text_chunks == 0) {
            out.ttft = std::chrono::duration<double>(now - start).count();
            if (on_first_token) on_first_token();
          } else {
            out.itl.push_back(std::chrono::duration<double>(now - last).count());
          }
          out.token_times.push_back(seconds_since(t0_, now));
          last = now;
          ++text_chunks;
          out.generated_text += chunk.text;
          break;
        case StreamChunk::Kind::kEmpty:
          break;
      }
      if (chunk.completion_tokens) usage_tokens = chunk.completion_tokens;
      if (chunk.prompt_tokens) out.server_prompt_tokens = chunk.prompt_tokens;
      return true;
    };

    httplib::Request req;
    req.method = "POST";
    req.path = prefix_ + config_.endpoint;
    req.headers = to_headers(config_);
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    req.body = request_body(in).dump();
    req.response_handler = [&](const httplib::Response& r) {
      out.http_status = r.status;
      return true;
    };
    req.content_receiver = [&](const char* data, std::size_t len, std::uint64_t, std::uint64_t) {
      if (Clock::now() > deadline) {
        out.error = "request timed out after " + std::to_string(config_.timeout_s) + " s";
        return false;
      }
      if (out.http_status != 200) {
        if (error_body.size() < 4096) error_body.append(data, std::min<std::size_t>(len, 4096));
        return true;
      }
      if (done || failed_in_stream) return true;  // drain what follows [DONE]
      parser.feed(std::string_view(data, len), on_event);
      if (parser.pending_bytes() > kMaxPendingSse) {
        out.error = "malformed SSE: an event longer than 16 MiB without a line end";
        return false;
      }
      return true;
    };

    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    const bool ok = cli.send(req, res, err);
    if (!ok && out.error.empty()) {
      out.error = "HTTP request failed: " + describe(err);
      if (err == httplib::Error::Read && text_chunks > 0)
        out.error += " (stream cut or stalled after " + std::to_string(text_chunks) + " chunks)";
    }
    if (out.error.empty() && out.http_status != 200) {
      out.error = "HTTP " + std::to_string(out.http_status);
      if (!error_body.empty()) {
        const auto j = nlohmann::json::parse(error_body, nullptr, false);
        if (!j.is_discarded() && j.contains("error") && j["error"].is_object() &&
            j["error"].contains("message") && j["error"]["message"].is_string())
          out.error += ": " + j["error"]["message"].get<std::string>();
        else
          out.error += ": " + error_body.substr(0, 200);
      }
    }
    if (out.error.empty() && !done) {
      out.error = parser.has_partial() ? "stream truncated mid-event (no data: [DONE])"
                                       : "stream ended without data: [DONE]";
    }
    if (out.error.empty() && text_chunks == 0)
      out.error = "Never received a valid chunk to calculate TTFT.";
    out.latency = std::chrono::duration<double>(last - start).count();
    out.output_tokens = usage_tokens ? static_cast<int>(*usage_tokens) : text_chunks;
    out.success = out.error.empty();
  } catch (const std::exception& e) {
    out.success = false;
    out.error = std::string("client exception: ") + e.what();
  }
  if (!out.success) out.latency = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

std::optional<std::string> OpenAiClient::first_model(std::string* error) const {
  try {
    httplib::Client cli(host_);
    set_timeouts(cli, config_.connect_timeout_s, std::min(config_.timeout_s, 30.0));
    auto res = cli.Get(prefix_ + "/v1/models", to_headers(config_));
    if (!res) {
      if (error) *error = "GET /v1/models: " + describe(res.error());
      return std::nullopt;
    }
    if (res->status != 200) {
      if (error) *error = "GET /v1/models: HTTP " + std::to_string(res->status);
      return std::nullopt;
    }
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (!j.is_discarded() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].contains("id") && j["data"][0]["id"].is_string())
      return j["data"][0]["id"].get<std::string>();
    if (error) *error = "GET /v1/models: no model in the answer";
  } catch (const std::exception& e) {
    if (error) *error = std::string("GET /v1/models: ") + e.what();
  }
  return std::nullopt;
}

bool OpenAiClient::wait_ready(double timeout_s) const {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(timeout_s));
  do {
    try {
      httplib::Client cli(host_);
      set_timeouts(cli, std::min(config_.connect_timeout_s, 5.0), 10.0);
      for (const char* path : {"/health", "/v1/models"}) {
        auto res = cli.Get(prefix_ + path, to_headers(config_));
        if (res && res->status == 200) return true;
      }
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  } while (Clock::now() < until);
  return false;
}

std::optional<int> OpenAiClient::count_tokens(const std::string& text) const {
  try {
    httplib::Client cli(host_);
    set_timeouts(cli, config_.connect_timeout_s, std::min(config_.timeout_s, 60.0));
    const nlohmann::json body = {
        {"model", config_.model}, {"prompt", text}, {"add_special_tokens", false}};
    auto res = cli.Post(prefix_ + "/tokenize", to_headers(config_), body.dump(),
                        "application/json");
    if (!res || res->status != 200) return std::nullopt;
    const auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    if (j.contains("count") && j["count"].is_number_integer()) return j["count"].get<int>();
    if (j.contains("tokens") && j["tokens"].is_array()) return static_cast<int>(j["tokens"].size());
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace hymoe::bench
