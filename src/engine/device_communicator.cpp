#include "hymoe/engine/device_communicator.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "hymoe/common/error.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/layer_kernels.h"
#include "hymoe/gpu/stream.h"
#include "rendezvous.h"

namespace hymoe {

namespace {

enum Op { kAllGather = 1, kReduceScatter, kSendRecv, kAllToAll };

// One rank's stream, its two ordering events and its scratch (a peer's slice from another device
// for the reduce-scatter's sum), all on the rank's device.
struct RankState {
  int device = 0;
  std::unique_ptr<gpu::Stream> stream;
  std::unique_ptr<gpu::Event> ready, done;
  gpu::DeviceBuffer scratch;
  std::vector<void*> peers_done;
};

}  // namespace

struct DeviceGroup::Impl : detail::Rendezvous {
  Impl(int n_ranks, double timeout) : Rendezvous("device communicator", n_ranks, timeout) {}
  std::vector<RankState> ranks;
  std::vector<std::unique_ptr<Communicator>> comms;
};

namespace {

class DeviceCommunicator final : public Communicator {
 public:
  DeviceCommunicator(DeviceGroup::Impl& g, int rank) : g_(g), rank_(rank), st_(g.ranks[static_cast<size_t>(rank)]) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.n; }
  void* stream() const override { return static_cast<void*>(st_.stream->get()); }

  void all_gather(const void* send, void* recv, size_t bytes) override {
    call("all_gather", [&] {
      const auto& posts = arrive({kAllGather, send, bytes, -1, {}, {}});
      const std::string error = detail::check_all_gather(posts, rank_, bytes);
      if (error.empty()) {
        for (size_t r = 0; r < posts.size(); ++r) copy_from(posts[r], static_cast<std::byte*>(recv) + r * bytes, 0, bytes);
      }
      leave(error);
    });
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t count) override {
    call("reduce_scatter_sum", [&] {
      const size_t bytes = count * sizeof(float);
      const auto& posts = arrive({kReduceScatter, send, bytes, -1, {}, {}});
      const std::string error = detail::check_reduce_scatter(posts, rank_, count);
      if (error.empty() && count) {
        // recv = slice of rank 0, then + slice of rank 1, + ...: FP32 adds in rank order.
        const size_t offset = static_cast<size_t>(rank_) * bytes;
        copy_from(posts[0], recv, offset, bytes);
        for (size_t r = 1; r < posts.size(); ++r) {
          const detail::Post& p = posts[r];
          const float* slice = nullptr;
          if (p.device == st_.device) {
            wait(p);
            slice = reinterpret_cast<const float*>(static_cast<const std::byte*>(p.send) + offset);
          } else {
            if (st_.scratch.bytes() < bytes) {
              st_.scratch = {};
              st_.scratch = gpu::DeviceBuffer(bytes);
            }
            copy_from(p, st_.scratch.data(), offset, bytes);
            slice = st_.scratch.as<float>();
          }
          gpu::residual_add({.h = recv, .a = slice, .n = static_cast<int64_t>(count)}, st_.stream->get());
        }
      }
      leave(error);
    });
  }

  void send_recv(const void* send, size_t send_bytes, int to, void* recv, size_t recv_bytes, int from) override {
    check_peer(to, "send_recv's destination");
    check_peer(from, "send_recv's source");
    call("send_recv", [&] {
      const auto& posts = arrive({kSendRecv, send, send_bytes, to, {}, {}});
      const std::string error = detail::check_send_recv(posts, rank_, from, recv_bytes);
      if (error.empty()) copy_from(posts[static_cast<size_t>(from)], recv, 0, recv_bytes);
      leave(error);
    });
  }

  void all_to_all_v(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_offsets,
                    void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets) override {
    detail::check_all_to_all_spans(static_cast<size_t>(g_.n), send_counts, send_offsets, recv_counts, recv_offsets);
    call("all_to_all_v", [&] {
      const auto& posts = arrive({kAllToAll, send, 0, -1, send_counts, send_offsets});
      const std::string error = detail::check_all_to_all(posts, rank_, recv_counts);
      for (size_t r = 0; error.empty() && r < posts.size(); ++r)
        copy_from(posts[r], static_cast<std::byte*>(recv) + recv_offsets[r], posts[r].send_offsets[static_cast<size_t>(rank_)],
                  recv_counts[r]);
      leave(error);
    });
  }

  void synchronize() override {
    gpu::DeviceGuard guard(st_.device);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(g_.timeout_s);
    for (;;) {
      if (aborted()) g_.throw_aborted();
      const cudaError_t q = cudaStreamQuery(st_.stream->get());
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) fail(fmt::format("rank {}: {}", rank_, cudaGetErrorString(q)));
      if (std::chrono::steady_clock::now() > deadline)
        fail(fmt::format("rank {} waited {} s for its collectives (a peer lost or stalled)", rank_, g_.timeout_s));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  void check_peer(int peer, const char* what) const {
    HYMOE_CHECK(peer >= 0 && peer < g_.n, kInvalidArgument, "{} {} is not a rank of a group of {}", what, peer, g_.n);
  }
  bool aborted() {
    std::lock_guard lock(g_.mu);
    return g_.aborted;
  }
  [[noreturn]] void fail(const std::string& why) {
    g_.abort(why);
    g_.throw_aborted();
  }
  // Runs a collective on the rank's device; a CUDA error while enqueueing fails the whole group
  // (its peers would wait for this rank's part until the timeout).
  template <typename Fn>
  void call(const char* what, Fn fn) {
    gpu::DeviceGuard guard(st_.device);
    try {
      fn();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnavailable && e.kind() != ErrorKind::kInvalidArgument)
        g_.abort(fmt::format("rank {} {}: {}", rank_, what, e.what()));
      throw;
    }
  }
  // Phase 1: the send buffer's writers done on this stream (the ready event), then the posts.
  const std::vector<detail::Post>& arrive(detail::Post p) {
    st_.ready->record(st_.stream->get());
    p.device = st_.device;
    p.ready = st_.ready->get();
    return g_.arrive(rank_, p);
  }
  // Phase 2: this rank's reads enqueued (the done event); then this stream waits for every peer's
  // reads before anything after the call may overwrite the send buffer.
  void leave(const std::string& error) {
    st_.done->record(st_.stream->get());
    g_.leave(rank_, error, st_.done->get(), st_.peers_done);
    for (int r = 0; r < g_.n; ++r) {
      if (r != rank_)
        HYMOE_CUDA_CHECK(cudaStreamWaitEvent(st_.stream->get(), static_cast<cudaEvent_t>(st_.peers_done[static_cast<size_t>(r)]), 0));
    }
  }
  void wait(const detail::Post& p) {
    if (p.ready != st_.ready->get()) HYMOE_CUDA_CHECK(cudaStreamWaitEvent(st_.stream->get(), static_cast<cudaEvent_t>(p.ready), 0));
  }
  // bytes of p's send buffer from `offset` into dst (on this rank's device), after p's writers.
  void copy_from(const detail::Post& p, void* dst, size_t offset, size_t bytes) {
    if (bytes == 0) return;
    wait(p);
    const void* src = static_cast<const std::byte*>(p.send) + offset;
    if (p.device == st_.device) {
      HYMOE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st_.stream->get()));
    } else {
      HYMOE_CUDA_CHECK(cudaMemcpyPeerAsync(dst, st_.device, src, p.device, bytes, st_.stream->get()));
    }
  }

  DeviceGroup::Impl& g_;
  int rank_;
  RankState& st_;
};

}  // namespace

DeviceGroup::DeviceGroup(std::vector<int> devices, double timeout_s) {
  HYMOE_CHECK(!devices.empty(), kInvalidArgument, "device communicator: no devices");
  const int available = gpu::device_count();
  for (int d : devices)
    HYMOE_CHECK(d >= 0 && d < available, kInvalidArgument, "device communicator: device {} of {}", d, available);
  impl_ = std::make_unique<Impl>(static_cast<int>(devices.size()), timeout_s);
  impl_->ranks.resize(devices.size());
  for (size_t r = 0; r < devices.size(); ++r) {
    RankState& st = impl_->ranks[r];
    st.device = devices[r];
    gpu::DeviceGuard guard(st.device);
    st.stream = std::make_unique<gpu::Stream>();
    st.ready = std::make_unique<gpu::Event>(/*timing=*/false);
    st.done = std::make_unique<gpu::Event>(/*timing=*/false);
    st.peers_done.assign(devices.size(), nullptr);
  }
  for (size_t r = 0; r < devices.size(); ++r)
    impl_->comms.push_back(std::make_unique<DeviceCommunicator>(*impl_, static_cast<int>(r)));
}

DeviceGroup::~DeviceGroup() {
  impl_->comms.clear();
  for (RankState& st : impl_->ranks) {
    gpu::DeviceGuard guard(st.device);
    (void)cudaStreamSynchronize(st.stream->get());
    st.scratch = {};
    st.done.reset();
    st.ready.reset();
    st.stream.reset();
  }
}

int DeviceGroup::size() const { return impl_->n; }
int DeviceGroup::device(int rank) const { return impl_->ranks.at(static_cast<size_t>(rank)).device; }

Communicator& DeviceGroup::rank(int r) {
  HYMOE_CHECK(r >= 0 && r < impl_->n, kInvalidArgument, "device communicator: rank {} of a group of {}", r, impl_->n);
  return *impl_->comms[static_cast<size_t>(r)];
}

void DeviceGroup::abort(const std::string& why) { impl_->abort(why); }

}  // namespace hymoe
