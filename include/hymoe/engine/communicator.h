// Collective communication between the ranks of a multi-GPU prefill (DSLP, issue 44): the
// operations striped context-parallel attention (one ring pass of latent KV) and SmallEP (an
// all-gather of the tokens, a reduce-scatter of the partial sums) need, and the dispatch/combine
// all-to-all of standard expert parallelism, the baseline.
//
// Every rank calls the same collectives in the same order. Buffers live in the rank's memory:
// host memory for InProcessGroup's ranks (threads of one process; the algorithms' tests and CI),
// whose calls return when this rank's part is done (its receive buffer filled, its send buffer
// free again); device memory for NcclGroup's (nccl_communicator.h), whose calls enqueue on the
// rank's stream() and are done at synchronize().
//
// A failed rank must not hang the others: InProcessGroup bounds every wait (timeout_s) and
// abort(why) wakes every rank waiting in a collective; both make the calls throw hymoe::Error
// kUnavailable naming the cause, and every later call on the group throws the same.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hymoe {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The CUDA stream (a cudaStream_t) the calls are ordered on; nullptr for host communicators.
  virtual void* stream() const { return nullptr; }
  // Waits until every call so far is done (bounded by the group's timeout; throws kUnavailable
  // when the group failed). Host communicators: nothing to wait for.
  virtual void synchronize() {}

  // recv[r * bytes, (r + 1) * bytes) = rank r's `send` (bytes each), for every rank r.
  virtual void all_gather(const void* send, void* recv, size_t bytes) = 0;
  // Elementwise sum over ranks of `send` (size() * count floats); this rank receives slice
  // [rank * count, (rank + 1) * count). InProcessGroup sums in rank order (0, 1, ...): bitwise
  // what one process adding them in that order gets.
  virtual void reduce_scatter_sum(const float* send, float* recv, size_t count) = 0;
  // One ring step: `send` (send_bytes) to rank `to`, `recv` (recv_bytes) from rank `from`; the
  // sender's size must equal the receiver's (kInvalidArgument otherwise, on both).
  virtual void send_recv(const void* send, size_t send_bytes, int to, void* recv, size_t recv_bytes, int from) = 0;
  // All-to-all with per-peer byte counts: this rank's send[send_offsets[r], + send_counts[r])
  // goes to rank r, which receives it at recv[recv_offsets[this rank], + recv_counts[this rank]);
  // each pair's counts must agree (kInvalidArgument otherwise). Spans hold size() values.
  virtual void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                            std::span<const size_t> send_offsets, void* recv, std::span<const size_t> recv_counts,
                            std::span<const size_t> recv_offsets) = 0;
};

// The ranks of one process: InProcessGroup (host memory, threads), DeviceGroup
// (device_communicator.h: CUDA devices, the same one repeated allowed) and NcclGroup
// (nccl_communicator.h: one NCCL rank a device). Each rank is driven by its own host thread.
class CommunicatorGroup {
 public:
  virtual ~CommunicatorGroup() = default;
  virtual int size() const = 0;
  // The CUDA device of rank r's buffers and stream; -1 for host memory.
  virtual int device(int r) const = 0;
  // Throws kInvalidArgument for a rank outside [0, size()).
  virtual Communicator& rank(int r) = 0;
  // Fails the group: every rank waiting in a collective (or a device group's synchronize()), and
  // every later call, throws kUnavailable with `why`. For a rank whose own work failed, so that
  // its peers do not wait out the timeout. The first reason given stands.
  virtual void abort(const std::string& why) = 0;
};

// `ranks` communicators over host memory for threads of one process (rank r's calls from one
// thread at a time). Every collective is a rendezvous: each rank posts its buffers, then copies
// what it receives straight from its peers' send buffers, then waits until every peer has done so.
class InProcessGroup final : public CommunicatorGroup {
 public:
  explicit InProcessGroup(int ranks, double timeout_s = 60.0);
  ~InProcessGroup() override;
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const override;
  int device(int) const override { return -1; }
  Communicator& rank(int r) override;
  void abort(const std::string& why) override;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace hymoe
