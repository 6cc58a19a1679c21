#include "hymoe/engine/communicator.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "hymoe/common/error.h"
#include "rendezvous.h"

namespace hymoe {

struct InProcessGroup::Shared : detail::Rendezvous {
  Shared(int ranks, double timeout) : Rendezvous("in-process communicator", ranks, timeout) {}
};

namespace {

enum Op { kAllGather = 1, kReduceScatter, kSendRecv, kAllToAll };

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessGroup::Shared& shared, int rank) : s_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.n; }

  void all_gather(const void* send, void* recv, size_t bytes) override {
    const std::vector<detail::Post>& posts = arrive({kAllGather, send, bytes, -1, {}, {}});
    const std::string error = detail::check_all_gather(posts, rank_, bytes);
    if (error.empty() && bytes) {
      for (size_t r = 0; r < posts.size(); ++r)
        std::memcpy(static_cast<std::byte*>(recv) + r * bytes, posts[r].send, bytes);
    }
    leave(error);
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t count) override {
    const std::vector<detail::Post>& posts = arrive({kReduceScatter, send, count * sizeof(float), -1, {}, {}});
    const std::string error = detail::check_reduce_scatter(posts, rank_, count);
    if (error.empty()) {
      const size_t base = static_cast<size_t>(rank_) * count;
      for (size_t i = 0; i < count; ++i) {
        float sum = static_cast<const float*>(posts[0].send)[base + i];
        for (int r = 1; r < s_.n; ++r) sum += static_cast<const float*>(posts[static_cast<size_t>(r)].send)[base + i];
        recv[i] = sum;
      }
    }
    leave(error);
  }

  void send_recv(const void* send, size_t send_bytes, int to, void* recv, size_t recv_bytes, int from) override {
    check_peer(to, "send_recv's destination");
    check_peer(from, "send_recv's source");
    const std::vector<detail::Post>& posts = arrive({kSendRecv, send, send_bytes, to, {}, {}});
    const std::string error = detail::check_send_recv(posts, rank_, from, recv_bytes);
    if (error.empty() && recv_bytes) std::memcpy(recv, posts[static_cast<size_t>(from)].send, recv_bytes);
    leave(error);
  }

  void all_to_all_v(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_offsets,
                    void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets) override {
    detail::check_all_to_all_spans(static_cast<size_t>(s_.n), send_counts, send_offsets, recv_counts, recv_offsets);
    const std::vector<detail::Post>& posts = arrive({kAllToAll, send, 0, -1, send_counts, send_offsets});
    const std::string error = detail::check_all_to_all(posts, rank_, recv_counts);
    for (size_t r = 0; error.empty() && r < posts.size(); ++r) {
      if (recv_counts[r])
        std::memcpy(static_cast<std::byte*>(recv) + recv_offsets[r],
                    static_cast<const std::byte*>(posts[r].send) + posts[r].send_offsets[static_cast<size_t>(rank_)],
                    recv_counts[r]);
    }
    leave(error);
  }

 private:
  void check_peer(int peer, const char* what) const {
    HYMOE_CHECK(peer >= 0 && peer < s_.n, kInvalidArgument, "{} {} is not a rank of a group of {}", what, peer, s_.n);
  }
  const std::vector<detail::Post>& arrive(const detail::Post& p) { return s_.arrive(rank_, p); }
  void leave(const std::string& error) { s_.leave(rank_, error); }

  InProcessGroup::Shared& s_;
  int rank_;
};

}  // namespace

InProcessGroup::InProcessGroup(int ranks, double timeout_s) : shared_(std::make_shared<Shared>(ranks, timeout_s)) {
  for (int r = 0; r < ranks; ++r) comms_.push_back(std::make_unique<InProcessCommunicator>(*shared_, r));
}

InProcessGroup::~InProcessGroup() = default;

int InProcessGroup::size() const { return shared_->n; }

Communicator& InProcessGroup::rank(int r) {
  HYMOE_CHECK(r >= 0 && r < shared_->n, kInvalidArgument, "in-process communicator: rank {} of a group of {}", r,
              shared_->n);
  return *comms_[static_cast<size_t>(r)];
}

void InProcessGroup::abort(const std::string& why) { shared_->abort(why); }

}  // namespace hymoe
