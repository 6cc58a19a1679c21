#include "http_core.h"

#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <netinet/in.h>

#include "chunked_framing.h"
#include "hymoe/common/log.h"
#include "hymoe/server/api_error.h"
#include "hymoe/server/openai_request.h"

namespace hymoe::server {
namespace {

using Clock = std::chrono::steady_clock;

int to_ms(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }

// poll() for `events` up to `timeout_ms`, restarted on EINTR; the revents, 0 on timeout.
short wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return p.revents;
    if (r == 0 || errno != EINTR) return 0;
    timeout_ms = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  }
}

// As httplib writes endpoints (numeric host, port), so that PeerWatch can find the socket.
void endpoint(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return;
  }
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host.data(), static_cast<socklen_t>(host.size()),
                  nullptr, 0, NI_NUMERICHOST) == 0) {
    ip = host.data();
  }
}

// One connection's socket with a read buffer that lives as long as the connection, so bytes
// read ahead belong to the next request instead of being dropped.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(socket_t sock, int read_timeout_ms, int write_timeout_ms)
      : sock_(sock), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms), buf_(16 * 1024) {}

  bool is_readable() const override { return buffered() || (wait_for(sock_, POLLIN, read_timeout_ms_) & POLLIN); }

  // Writable and not closed by the peer (httplib's rule, for DataSink::is_writable: a peer that
  // has closed its end counts as gone).
  bool is_writable() const override {
    if (!can_send()) return false;
    if (buffered() || !(wait_for(sock_, POLLIN, 0) & POLLIN)) return true;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (consumed_ >= budget_) {
      over_budget_ = true;
      return -1;
    }
    if (body_problem_) return -1;
    size = std::min(size, budget_ - consumed_);
    if (!buffered()) {
      if (!is_readable()) {
        if (in_body_) body_problem_ = "no body bytes arrived within the read timeout";
        return -1;
      }
      ssize_t n;
      do {
        n = ::recv(sock_, buf_.data(), buf_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) {
        if (in_body_) body_problem_ = "the connection ended before the end of the request body";
        return n;
      }
      off_ = 0;
      size_ = static_cast<size_t>(n);
    }
    const size_t k = std::min(size, size_ - off_);
    std::memcpy(ptr, buf_.data() + off_, k);
    off_ += k;
    consumed_ += k;
    if (chunked_ && !chunked_->done() && !chunked_->feed(ptr, k)) {
      body_problem_ = chunked_->problem();
      return -1;
    }
    return static_cast<ssize_t>(k);
  }

  // Sends whatever the peer did with its own end: a client that half-closes after its request
  // (or after a body shorter than its Content-Length) still reads the answer; one that has gone
  // makes send fail (EPIPE or ECONNRESET) one write later.
  ssize_t write(const char* ptr, size_t size) override {
    if (!can_send()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n > 0) written_ += static_cast<size_t>(n);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) endpoint(addr, len, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) endpoint(addr, len, ip, port);
  }
  socket_t socket() const override { return sock_; }

  bool buffered() const { return off_ < size_; }
  void start_request(size_t budget) {
    budget_ = budget;
    consumed_ = 0;
    written_ = 0;
    over_budget_ = false;
    in_body_ = false;
    chunked_.reset();
    body_problem_ = nullptr;
  }
  // The request line and headers are read: what is read next is the body, checked as chunked
  // framing where `chunked`.
  void start_body(bool chunked) {
    in_body_ = true;
    if (chunked) chunked_.emplace();
  }
  bool over_budget() const { return over_budget_; }
  const char* body_problem() const { return body_problem_; }
  size_t written() const { return written_; }

 private:
  bool can_send() const {
    const short ev = wait_for(sock_, POLLOUT, write_timeout_ms_);
    return (ev & POLLOUT) && !(ev & (POLLERR | POLLHUP));
  }

  socket_t sock_;
  int read_timeout_ms_;
  int write_timeout_ms_;
  std::vector<char> buf_;
  size_t off_ = 0, size_ = 0;  // unread bytes are buf_[off_, size_)
  size_t budget_ = SIZE_MAX, consumed_ = 0, written_ = 0;
  bool over_budget_ = false;
  bool in_body_ = false;
  std::optional<ChunkedFraming> chunked_;  // set while a chunked body is read
  const char* body_problem_ = nullptr;     // why reading the body failed (static text)
};

// The connection this thread is answering on (handlers run on the connection's thread).
struct Connection {
  ConnectionStream* stream = nullptr;
  bool close_requested = false;
};
thread_local Connection* tl_connection = nullptr;

// Waits for the next request's first byte: true when there is one (or the peer closed, which
// the request parser then sees), false after `timeout_s` idle or once the server stops.
bool wait_for_request(const ConnectionStream& strm, time_t timeout_s, const std::atomic<socket_t>& listening) {
  if (strm.buffered()) return true;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (listening != INVALID_SOCKET) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    if (wait_for(strm.socket(), POLLIN, static_cast<int>(std::min<int64_t>(left, 100)))) return true;
  }
  return false;
}

// Closes after sending FIN and reading what the client still sends for a moment: closing a
// socket with unread bytes resets the connection, and the client may lose the answer with it.
void close_lingering(socket_t sock, bool linger) {
  ::shutdown(sock, SHUT_WR);
  if (linger) {
    std::array<char, 16 * 1024> sink;
    const auto deadline = Clock::now() + std::chrono::milliseconds(500);
    for (size_t drained = 0; drained < (1u << 20);) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0 || !(wait_for(sock, POLLIN, static_cast<int>(left)) & (POLLIN | POLLHUP | POLLERR))) break;
      const ssize_t n = ::recv(sock, sink.data(), sink.size(), 0);
      if (n <= 0) break;
      drained += static_cast<size_t>(n);
    }
  }
  ::close(sock);
}

}  // namespace

void HttpCore::close_after(httplib::Response& res) {
  if (tl_connection) tl_connection->close_requested = true;
  if (res.get_header_value("Connection") != "close") res.set_header("Connection", "close");
}

bool HttpCore::request_over_budget() { return tl_connection && tl_connection->stream->over_budget(); }

const char* HttpCore::body_problem() { return tl_connection ? tl_connection->stream->body_problem() : nullptr; }

void HttpCore::tidy_connection_headers(httplib::Response& res) {
  bool close = false;
  const auto [first, last] = res.headers.equal_range("Connection");
  for (auto it = first; it != last; ++it) close = close || it->second == "close";
  if (!close) return;
  res.headers.erase("Connection");
  res.headers.erase("Keep-Alive");
  res.headers.emplace("Connection", "close");
}

bool HttpCore::process_and_close_socket(socket_t sock) {
  ConnectionStream strm(sock, to_ms(read_timeout_sec_, read_timeout_usec_), to_ms(write_timeout_sec_, write_timeout_usec_));
  Connection conn{&strm, false};
  tl_connection = &conn;
  bool ok = false, failed = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!wait_for_request(strm, keep_alive_timeout_sec_, svr_sock_)) break;
    strm.start_request(request_byte_budget_);
    conn.close_requested = false;
    bool peer_asked_close = false;
    try {
      // Called once the line and headers are parsed; httplib decodes a body as chunked where the
      // first Transfer-Encoding value is "chunked" (case-insensitive), so the check does too.
      ok = process_request(strm, /*close_connection=*/left == 1, peer_asked_close, [&strm](httplib::Request& req) {
        strm.start_body(::strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0);
      });
    } catch (const std::exception& e) {
      failed = true;
      log::get("server")->error("answering a request failed: {}", to_valid_utf8(e.what()));
    } catch (...) {
      failed = true;
      log::get("server")->error("answering a request failed with an unknown exception");
    }
    if (failed) {
      if (strm.written() == 0) {
        const std::string body = ApiError::kFallbackBody;
        const std::string answer = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                                   "Connection: close\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\n\r\n" + body;
        strm.write(answer.data(), answer.size());
      }
      ok = false;
    }
    if (!ok || peer_asked_close || conn.close_requested) break;
  }
  tl_connection = nullptr;
  const bool unread = strm.buffered() || (wait_for(sock, POLLIN, 0) & POLLIN);
  close_lingering(sock, unread || conn.close_requested || failed);
  return ok;
}

}  // namespace hymoe::server
