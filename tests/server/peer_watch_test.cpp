// PeerWatch against real loopback TCP connections: it finds the accepted socket by its endpoints,
// sees data as "still there" and a close or reset as gone, and finds nothing for unknown ones.
#include "peer_watch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace hymoe::server {
namespace {

// A connected loopback pair: `client` connected to `accepted` (owned; closed on destruction).
struct Pair {
  int listener = -1, client = -1, accepted = -1;
  std::string peer_host, self_host;
  int peer_port = 0, self_port = 0;

  Pair() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listener, 4) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    accepted = accept(listener, nullptr, nullptr);
    sockaddr_in peer{}, self{};
    socklen_t pl = sizeof peer, sl = sizeof self;
    getpeername(accepted, reinterpret_cast<sockaddr*>(&peer), &pl);
    getsockname(accepted, reinterpret_cast<sockaddr*>(&self), &sl);
    char buf[INET_ADDRSTRLEN];
    peer_host = inet_ntop(AF_INET, &peer.sin_addr, buf, sizeof buf);
    self_host = inet_ntop(AF_INET, &self.sin_addr, buf, sizeof buf);
    peer_port = ntohs(peer.sin_port);
    self_port = ntohs(self.sin_port);
  }
  ~Pair() {
    for (int fd : {client, accepted, listener})
      if (fd >= 0) close(fd);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
};

bool becomes_closed(const PeerWatch& w) {
  for (int i = 0; i < 100; ++i) {
    if (w.peer_closed()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(PeerWatch, FindsTheSocketAndSeesTheClientLeave) {
  Pair p;
  ASSERT_GE(p.accepted, 0);
  const PeerWatch w(p.peer_host, p.peer_port, p.self_host, p.self_port);
  ASSERT_TRUE(w.found());
  EXPECT_FALSE(w.peer_closed());
  ASSERT_EQ(write(p.client, "GET / HTTP/1.1\r\n", 16), 16);  // unread data is not a hang-up
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(w.peer_closed());
  close(p.client);
  p.client = -1;
  EXPECT_TRUE(becomes_closed(w));
}

TEST(PeerWatch, UnknownEndpointsFindNothing) {
  Pair p;
  ASSERT_GE(p.accepted, 0);
  const PeerWatch w(p.peer_host, p.peer_port + 1 == 65536 ? 1 : p.peer_port + 1, p.self_host, p.self_port);
  EXPECT_FALSE(w.found());
  EXPECT_FALSE(w.peer_closed());
  const PeerWatch none("127.0.0.1", -1, "127.0.0.1", -1);
  EXPECT_FALSE(none.found());
}

}  // namespace
}  // namespace hymoe::server
