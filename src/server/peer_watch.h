// PeerWatch: notices that the client of a non-streamed request has gone away.
// cpp-httplib 0.11 gives a handler no access to its socket, and a handler that waits for a whole
// generation writes nothing until the end, so a vanished client would otherwise keep its request
// running to max_tokens. The watch finds the socket by the exchange's two endpoints (the handler
// thread owns that connection until it returns, so the match is unique and stays valid) and
// polls it for a hang-up. Linux: /proc/self/fd and POLLRDHUP. A client that half-closes its side
// after sending the request (rare for HTTP clients) reads as gone.
#pragma once

#include <string>

namespace hymoe::server {

class PeerWatch {
 public:
  PeerWatch(const std::string& remote_addr, int remote_port, const std::string& local_addr,
            int local_port);
  // Whether the connection's socket was found (if not, peer_closed() is always false).
  bool found() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection. Never blocks.
  bool peer_closed() const;

 private:
  int fd_ = -1;
};

}  // namespace hymoe::server
