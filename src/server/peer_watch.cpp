#include "peer_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>

namespace hymoe::server {
namespace {

// The numeric host and port of an address, as httplib writes them (getnameinfo NI_NUMERICHOST).
bool endpoint(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST], s[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof h, s, sizeof s,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  host = h;
  port = std::atoi(s);
  return true;
}

}  // namespace

PeerWatch::PeerWatch(const std::string& remote_addr, int remote_port, const std::string& local_addr,
                     int local_port) {
  if (remote_port <= 0 || local_port <= 0) return;
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), closedir);
  if (!dir) return;
  while (const dirent* e = readdir(dir.get())) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{}, self{};
    socklen_t peer_len = sizeof peer, self_len = sizeof self;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&self), &self_len) != 0)
      continue;
    std::string peer_host, self_host;
    int peer_port = 0, self_port = 0;
    if (!endpoint(peer, peer_len, peer_host, peer_port) || !endpoint(self, self_len, self_host, self_port))
      continue;
    if (peer_port == remote_port && self_port == local_port && peer_host == remote_addr &&
        self_host == local_addr) {
      fd_ = static_cast<int>(fd);
      return;
    }
  }
}

bool PeerWatch::peer_closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace hymoe::server
