#include "hymoe/engine/communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "hymoe/common/error.h"

namespace hymoe {

// What a rank posts for one collective: its buffers and sizes.
struct Post {
  int op = 0;
  const void* send = nullptr;
  size_t send_bytes = 0;
  int to = -1;
  std::span<const size_t> send_counts, send_offsets;
};

struct InProcessGroup::Shared {
  int n = 0;
  double timeout_s = 60;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Post> posts;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
  std::string why;

  [[noreturn]] void throw_aborted() const {
    HYMOE_THROW(kUnavailable, "in-process communicator: the group failed: {}", why);
  }
  void abort_locked(const std::string& reason) {
    if (!aborted) {
      aborted = true;
      why = reason;
    }
    cv.notify_all();
  }
  // Every rank arrives; the last one opens the next generation. Throws after an abort or when the
  // wait passes the timeout (which fails the group: a peer that never arrives is lost).
  void barrier(std::unique_lock<std::mutex>& lock, int rank) {
    if (aborted) throw_aborted();
    const uint64_t g = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    if (!cv.wait_until(lock, deadline, [&] { return generation != g || aborted; })) {
      abort_locked("rank " + std::to_string(rank) + " waited " + std::to_string(timeout_s) +
                   " s in a collective for a peer that did not arrive");
    }
    if (generation == g) throw_aborted();  // aborted (a completed barrier's abort waits for the next call)
  }
};

namespace {

enum Op { kAllGather = 1, kReduceScatter, kSendRecv, kAllToAll };

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessGroup::Shared& shared, int rank) : s_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.n; }

  void all_gather(const void* send, void* recv, size_t bytes) override {
    const std::vector<Post>& posts = arrive({kAllGather, send, bytes, -1, {}, {}});
    std::string error;
    for (int r = 0; r < s_.n; ++r) {
      if (posts[r].send_bytes != bytes) {
        error = fmt::format("all_gather: rank {} sends {} bytes, rank {} expects {}", r, posts[r].send_bytes, rank_, bytes);
        break;
      }
      if (bytes) std::memcpy(static_cast<std::byte*>(recv) + static_cast<size_t>(r) * bytes, posts[r].send, bytes);
    }
    leave(error);
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t count) override {
    const std::vector<Post>& posts = arrive({kReduceScatter, send, count * sizeof(float), -1, {}, {}});
    std::string error;
    for (int r = 0; r < s_.n && error.empty(); ++r) {
      if (posts[r].send_bytes != count * sizeof(float))
        error = fmt::format("reduce_scatter_sum: rank {} sends {} floats a rank, rank {} expects {}", r,
                            posts[r].send_bytes / sizeof(float), rank_, count);
    }
    if (error.empty()) {
      const size_t base = static_cast<size_t>(rank_) * count;
      for (size_t i = 0; i < count; ++i) {
        float sum = static_cast<const float*>(posts[0].send)[base + i];
        for (int r = 1; r < s_.n; ++r) sum += static_cast<const float*>(posts[r].send)[base + i];
        recv[i] = sum;
      }
    }
    leave(error);
  }

  void send_recv(const void* send, size_t send_bytes, int to, void* recv, size_t recv_bytes, int from) override {
    check_peer(to, "send_recv's destination");
    check_peer(from, "send_recv's source");
    const std::vector<Post>& posts = arrive({kSendRecv, send, send_bytes, to, {}, {}});
    std::string error;
    const Post& p = posts[static_cast<size_t>(from)];
    if (p.to != rank_) {
      error = fmt::format("send_recv: rank {} receives from rank {}, which sends to rank {}", rank_, from, p.to);
    } else if (p.send_bytes != recv_bytes) {
      error = fmt::format("send_recv: rank {} sends {} bytes to rank {}, which expects {}", from, p.send_bytes, rank_,
                          recv_bytes);
    } else if (recv_bytes) {
      std::memcpy(recv, p.send, recv_bytes);
    }
    leave(error);
  }

  void all_to_all_v(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_offsets,
                    void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets) override {
    const size_t n = static_cast<size_t>(s_.n);
    HYMOE_CHECK(send_counts.size() == n && send_offsets.size() == n && recv_counts.size() == n &&
                    recv_offsets.size() == n,
                kInvalidArgument, "all_to_all_v: counts and offsets need {} values each (one a rank)", n);
    const std::vector<Post>& posts = arrive({kAllToAll, send, 0, -1, send_counts, send_offsets});
    std::string error;
    for (size_t r = 0; r < n; ++r) {
      const Post& p = posts[r];
      const size_t bytes = p.send_counts[static_cast<size_t>(rank_)];
      if (bytes != recv_counts[r]) {
        error = fmt::format("all_to_all_v: rank {} sends {} bytes to rank {}, which expects {}", r, bytes, rank_,
                            recv_counts[r]);
        break;
      }
      if (bytes)
        std::memcpy(static_cast<std::byte*>(recv) + recv_offsets[r],
                    static_cast<const std::byte*>(p.send) + p.send_offsets[static_cast<size_t>(rank_)], bytes);
    }
    leave(error);
  }

 private:
  void check_peer(int peer, const char* what) const {
    HYMOE_CHECK(peer >= 0 && peer < s_.n, kInvalidArgument, "{} {} is not a rank of a group of {}", what, peer, s_.n);
  }
  // Phase 1: post, wait for every rank's post. The posts stay put until phase 2 ends.
  const std::vector<Post>& arrive(Post p) {
    std::unique_lock lock(s_.mu);
    if (s_.aborted) s_.throw_aborted();
    s_.posts[static_cast<size_t>(rank_)] = p;
    s_.barrier(lock, rank_);
    for (int r = 0; r < s_.n; ++r) {
      if (s_.posts[static_cast<size_t>(r)].op != p.op) {
        s_.abort_locked(fmt::format("rank {} called collective {} while rank {} called {} (calls out of order)", r,
                                    s_.posts[static_cast<size_t>(r)].op, rank_, p.op));
        s_.throw_aborted();
      }
    }
    return s_.posts;
  }
  // Phase 2: every rank has copied what it receives (peers may reuse their send buffers). A
  // mismatch found by this rank fails the whole group (its peers' parts are inconsistent too).
  void leave(const std::string& error) {
    std::unique_lock lock(s_.mu);
    if (!error.empty()) {
      s_.abort_locked(error);
      HYMOE_THROW(kInvalidArgument, "in-process communicator: {}", error);
    }
    s_.barrier(lock, rank_);
  }

  InProcessGroup::Shared& s_;
  int rank_;
};

}  // namespace

InProcessGroup::InProcessGroup(int ranks, double timeout_s) : shared_(std::make_shared<Shared>()) {
  HYMOE_CHECK(ranks >= 1, kInvalidArgument, "in-process communicator: {} ranks (need at least 1)", ranks);
  HYMOE_CHECK(timeout_s > 0, kInvalidArgument, "in-process communicator: timeout {} s must be positive", timeout_s);
  shared_->n = ranks;
  shared_->timeout_s = timeout_s;
  shared_->posts.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) comms_.push_back(std::make_unique<InProcessCommunicator>(*shared_, r));
}

InProcessGroup::~InProcessGroup() = default;

int InProcessGroup::size() const { return shared_->n; }

Communicator& InProcessGroup::rank(int r) {
  HYMOE_CHECK(r >= 0 && r < shared_->n, kInvalidArgument, "in-process communicator: rank {} of a group of {}", r,
              shared_->n);
  return *comms_[static_cast<size_t>(r)];
}

void InProcessGroup::abort(const std::string& why) {
  std::lock_guard lock(shared_->mu);
  shared_->abort_locked(why);
}

}  // namespace hymoe
