#include "hymoe/engine/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "hymoe/common/error.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/nccl_check.h"
#include "hymoe/gpu/stream.h"

namespace hymoe {

struct NcclGroup::Impl {
  std::vector<int> devices;
  double timeout_s = 60;
  std::vector<ncclComm_t> comms;
  std::vector<std::unique_ptr<gpu::Stream>> streams;
  std::vector<std::unique_ptr<Communicator>> ranks;
  std::atomic<bool> aborted{false};
  std::mutex mu;
  std::string why;

  [[noreturn]] void throw_aborted() {
    std::lock_guard lock(mu);
    HYMOE_THROW(kUnavailable, "NCCL group failed: {}", why);
  }
  void abort(const std::string& reason) {
    std::lock_guard lock(mu);
    if (aborted.exchange(true)) return;
    why = reason;
    for (ncclComm_t c : comms) (void)ncclCommAbort(c);
  }
};

namespace {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(NcclGroup::Impl& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(g_.devices.size()); }
  void* stream() const override { return static_cast<void*>(stream_t()); }

  void all_gather(const void* send, void* recv, size_t bytes) override {
    call("all_gather", [&] { HYMOE_NCCL_CHECK(ncclAllGather(send, recv, bytes, ncclUint8, comm(), stream_t())); });
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t count) override {
    call("reduce_scatter_sum",
         [&] { HYMOE_NCCL_CHECK(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm(), stream_t())); });
  }

  void send_recv(const void* send, size_t send_bytes, int to, void* recv, size_t recv_bytes, int from) override {
    check_peer(to);
    check_peer(from);
    call("send_recv", [&] {
      if (to == rank_ && from == rank_) {
        HYMOE_CHECK(send_bytes == recv_bytes, kInvalidArgument, "send_recv to itself: {} bytes sent, {} expected",
                    send_bytes, recv_bytes);
        if (send_bytes) HYMOE_CUDA_CHECK(cudaMemcpyAsync(recv, send, send_bytes, cudaMemcpyDeviceToDevice, stream_t()));
        return;
      }
      HYMOE_NCCL_CHECK(ncclGroupStart());
      HYMOE_NCCL_CHECK(ncclSend(send, send_bytes, ncclUint8, to, comm(), stream_t()));
      HYMOE_NCCL_CHECK(ncclRecv(recv, recv_bytes, ncclUint8, from, comm(), stream_t()));
      HYMOE_NCCL_CHECK(ncclGroupEnd());
    });
  }

  void all_to_all_v(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_offsets,
                    void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_offsets) override {
    const size_t n = static_cast<size_t>(size());
    HYMOE_CHECK(send_counts.size() == n && send_offsets.size() == n && recv_counts.size() == n &&
                    recv_offsets.size() == n,
                kInvalidArgument, "all_to_all_v: counts and offsets need {} values each (one a rank)", n);
    call("all_to_all_v", [&] {
      const auto* s = static_cast<const std::byte*>(send);
      auto* r = static_cast<std::byte*>(recv);
      const size_t me = static_cast<size_t>(rank_);
      HYMOE_CHECK(send_counts[me] == recv_counts[me], kInvalidArgument,
                  "all_to_all_v: rank {} sends itself {} bytes and expects {}", rank_, send_counts[me], recv_counts[me]);
      if (send_counts[me])
        HYMOE_CUDA_CHECK(cudaMemcpyAsync(r + recv_offsets[me], s + send_offsets[me], send_counts[me],
                                         cudaMemcpyDeviceToDevice, stream_t()));
      HYMOE_NCCL_CHECK(ncclGroupStart());
      for (size_t p = 0; p < n; ++p) {
        if (p == me) continue;
        if (send_counts[p])
          HYMOE_NCCL_CHECK(ncclSend(s + send_offsets[p], send_counts[p], ncclUint8, static_cast<int>(p), comm(), stream_t()));
        if (recv_counts[p])
          HYMOE_NCCL_CHECK(ncclRecv(r + recv_offsets[p], recv_counts[p], ncclUint8, static_cast<int>(p), comm(), stream_t()));
      }
      HYMOE_NCCL_CHECK(ncclGroupEnd());
    });
  }

  void synchronize() override {
    if (g_.aborted) g_.throw_aborted();
    gpu::DeviceGuard guard(g_.devices[static_cast<size_t>(rank_)]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(g_.timeout_s);
    for (;;) {
      if (g_.aborted) g_.throw_aborted();
      const cudaError_t q = cudaStreamQuery(stream_t());
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) fail(fmt::format("rank {}: {}", rank_, cudaGetErrorString(q)));
      ncclResult_t async = ncclSuccess;
      const ncclResult_t got = ncclCommGetAsyncError(comm(), &async);
      if (got != ncclSuccess || (async != ncclSuccess && async != ncclInProgress))
        fail(fmt::format("rank {}: NCCL error {} ({})", rank_, ncclGetErrorString(got != ncclSuccess ? got : async),
                         static_cast<int>(got != ncclSuccess ? got : async)));
      if (std::chrono::steady_clock::now() > deadline)
        fail(fmt::format("rank {} waited {} s for its collectives (a peer lost or stalled)", rank_, g_.timeout_s));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  ncclComm_t comm() const { return g_.comms[static_cast<size_t>(rank_)]; }
  cudaStream_t stream_t() const { return g_.streams[static_cast<size_t>(rank_)]->get(); }
  void check_peer(int peer) const {
    HYMOE_CHECK(peer >= 0 && peer < size(), kInvalidArgument, "rank {} is not a rank of a group of {}", peer, size());
  }
  [[noreturn]] void fail(const std::string& why) {
    g_.abort(why);
    g_.throw_aborted();
  }
  // Runs an enqueueing call on the rank's device; an error fails the whole group (a peer would
  // wait for this rank's part forever).
  template <typename Fn>
  void call(const char* what, Fn fn) {
    if (g_.aborted) g_.throw_aborted();
    gpu::DeviceGuard guard(g_.devices[static_cast<size_t>(rank_)]);
    try {
      fn();
    } catch (const Error& e) {
      g_.abort(fmt::format("rank {} {}: {}", rank_, what, e.what()));
      throw;
    }
  }

  NcclGroup::Impl& g_;
  int rank_;
};

}  // namespace

NcclGroup::NcclGroup(std::vector<int> devices, double timeout_s) : impl_(std::make_unique<Impl>()) {
  HYMOE_CHECK(!devices.empty(), kInvalidArgument, "NCCL group: no devices");
  HYMOE_CHECK(std::set<int>(devices.begin(), devices.end()).size() == devices.size(), kInvalidArgument,
              "NCCL group: a device listed twice (one rank a device)");
  HYMOE_CHECK(timeout_s > 0, kInvalidArgument, "NCCL group: timeout {} s must be positive", timeout_s);
  const int available = gpu::device_count();
  for (int d : devices)
    HYMOE_CHECK(d >= 0 && d < available, kInvalidArgument, "NCCL group: device {} of {}", d, available);
  impl_->devices = std::move(devices);
  impl_->timeout_s = timeout_s;
  const int n = static_cast<int>(impl_->devices.size());
  impl_->comms.resize(static_cast<size_t>(n));
  const ncclResult_t r = ncclCommInitAll(impl_->comms.data(), n, impl_->devices.data());
  HYMOE_CHECK(r == ncclSuccess, kUnavailable, "NCCL group over {} devices: ncclCommInitAll failed: {}", n,
              ncclGetErrorString(r));
  for (int k = 0; k < n; ++k) {
    gpu::DeviceGuard guard(impl_->devices[static_cast<size_t>(k)]);
    impl_->streams.push_back(std::make_unique<gpu::Stream>());
    impl_->ranks.push_back(std::make_unique<NcclCommunicator>(*impl_, k));
  }
}

NcclGroup::~NcclGroup() {
  if (!impl_->aborted) {
    for (size_t k = 0; k < impl_->comms.size(); ++k) {
      gpu::DeviceGuard guard(impl_->devices[k]);
      (void)cudaStreamSynchronize(impl_->streams[k]->get());
      (void)ncclCommDestroy(impl_->comms[k]);
    }
  }
  // Streams before anything else of the device goes.
  impl_->ranks.clear();
  for (size_t k = 0; k < impl_->streams.size(); ++k) {
    gpu::DeviceGuard guard(impl_->devices[k]);
    impl_->streams[k].reset();
  }
}

int NcclGroup::size() const { return static_cast<int>(impl_->devices.size()); }
int NcclGroup::device(int rank) const { return impl_->devices.at(static_cast<size_t>(rank)); }

Communicator& NcclGroup::rank(int r) {
  HYMOE_CHECK(r >= 0 && r < size(), kInvalidArgument, "NCCL group: rank {} of a group of {}", r, size());
  return *impl_->ranks[static_cast<size_t>(r)];
}

void NcclGroup::abort(const std::string& why) { impl_->abort(why); }

}  // namespace hymoe
