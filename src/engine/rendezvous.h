// The host side of an in-process collective (InProcessGroup, DeviceGroup): every rank posts what
// it offers, waits for every peer's post (phase 1), does its part, then waits until every peer
// has done its part (phase 2) before the posts may change. A timeout or an abort fails the whole
// group: every waiting rank, and every later call, throws kUnavailable with the first reason.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hymoe/common/error.h"

namespace hymoe::detail {

// What a rank posts for one collective: its buffers and sizes; device groups add where the
// buffers live and the events that order their streams.
struct Post {
  int op = 0;
  const void* send = nullptr;
  size_t send_bytes = 0;
  int to = -1;
  std::span<const size_t> send_counts, send_offsets;
  int device = -1;        // device groups: the rank's device
  void* ready = nullptr;  // device groups: a cudaEvent_t after the work that wrote `send`
  void* done = nullptr;   // device groups, phase 2: a cudaEvent_t after this rank's reads of its peers
};

struct Rendezvous {
  const char* name = "in-process communicator";
  int n = 0;
  double timeout_s = 60;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Post> posts;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
  std::string why;

  Rendezvous(const char* what, int ranks, double timeout) : name(what), n(ranks), timeout_s(timeout) {
    HYMOE_CHECK(ranks >= 1, kInvalidArgument, "{}: {} ranks (need at least 1)", what, ranks);
    HYMOE_CHECK(timeout > 0, kInvalidArgument, "{}: timeout {} s must be positive", what, timeout);
    posts.resize(static_cast<size_t>(ranks));
  }

  [[noreturn]] void throw_aborted() const { HYMOE_THROW(kUnavailable, "{}: the group failed: {}", name, why); }
  void abort_locked(const std::string& reason) {
    if (!aborted) {
      aborted = true;
      why = reason;
    }
    cv.notify_all();
  }
  void abort(const std::string& reason) {
    std::lock_guard lock(mu);
    abort_locked(reason);
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

  // Phase 1: post, wait for every rank's post; calls out of order fail the group. The posts stay
  // put until phase 2 ends.
  const std::vector<Post>& arrive(int rank, const Post& p) {
    std::unique_lock lock(mu);
    if (aborted) throw_aborted();
    // `done` stays: a peer still waking from the last call's phase 2 may not have read it yet.
    void* const done = posts[static_cast<size_t>(rank)].done;
    posts[static_cast<size_t>(rank)] = p;
    posts[static_cast<size_t>(rank)].done = done;
    barrier(lock, rank);
    for (int r = 0; r < n; ++r) {
      if (posts[static_cast<size_t>(r)].op != p.op) {
        abort_locked("rank " + std::to_string(r) + " called collective " + std::to_string(posts[static_cast<size_t>(r)].op) +
                     " while rank " + std::to_string(rank) + " called " + std::to_string(p.op) + " (calls out of order)");
        throw_aborted();
      }
    }
    return posts;
  }
  // Phase 2: every rank has done its part (peers may reuse their send buffers). A mismatch found
  // by this rank (`error`) fails the whole group: its peers' parts are inconsistent too.
  // Device groups post `done` and get every rank's back in done_out (copied under the lock: the
  // posts change as soon as a rank starts its next call).
  void leave(int rank, const std::string& error, void* done = nullptr, std::span<void*> done_out = {}) {
    std::unique_lock lock(mu);
    if (!error.empty()) {
      abort_locked(error);
      HYMOE_THROW(kInvalidArgument, "{}: {}", name, error);
    }
    posts[static_cast<size_t>(rank)].done = done;
    barrier(lock, rank);
    for (size_t r = 0; r < done_out.size() && r < posts.size(); ++r) done_out[r] = posts[r].done;
  }
};

// The checks of a collective's sizes, once every rank has posted (an empty string: they agree;
// else the mismatch, which fails the group at leave()). Every group runs the same ones.
inline std::string check_all_gather(const std::vector<Post>& posts, int rank, size_t bytes) {
  for (size_t r = 0; r < posts.size(); ++r) {
    if (posts[r].send_bytes != bytes)
      return fmt::format("all_gather: rank {} sends {} bytes, rank {} expects {}", r, posts[r].send_bytes, rank, bytes);
  }
  return {};
}
inline std::string check_reduce_scatter(const std::vector<Post>& posts, int rank, size_t count) {
  for (size_t r = 0; r < posts.size(); ++r) {
    if (posts[r].send_bytes != count * sizeof(float))
      return fmt::format("reduce_scatter_sum: rank {} sends {} floats a rank, rank {} expects {}", r,
                         posts[r].send_bytes / sizeof(float), rank, count);
  }
  return {};
}
inline std::string check_send_recv(const std::vector<Post>& posts, int rank, int from, size_t recv_bytes) {
  const Post& p = posts[static_cast<size_t>(from)];
  if (p.to != rank) return fmt::format("send_recv: rank {} receives from rank {}, which sends to rank {}", rank, from, p.to);
  if (p.send_bytes != recv_bytes)
    return fmt::format("send_recv: rank {} sends {} bytes to rank {}, which expects {}", from, p.send_bytes, rank, recv_bytes);
  return {};
}
// Before posting: one count and one offset a rank in each span (kInvalidArgument otherwise).
inline void check_all_to_all_spans(size_t ranks, std::span<const size_t> send_counts, std::span<const size_t> send_offsets,
                                   std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets) {
  HYMOE_CHECK(send_counts.size() == ranks && send_offsets.size() == ranks && recv_counts.size() == ranks &&
                  recv_offsets.size() == ranks,
              kInvalidArgument, "all_to_all_v: counts and offsets need {} values each (one a rank)", ranks);
}
inline std::string check_all_to_all(const std::vector<Post>& posts, int rank, std::span<const size_t> recv_counts) {
  for (size_t r = 0; r < posts.size(); ++r) {
    const size_t bytes = posts[r].send_counts[static_cast<size_t>(rank)];
    if (bytes != recv_counts[r])
      return fmt::format("all_to_all_v: rank {} sends {} bytes to rank {}, which expects {}", r, bytes, rank, recv_counts[r]);
  }
  return {};
}

}  // namespace hymoe::detail
