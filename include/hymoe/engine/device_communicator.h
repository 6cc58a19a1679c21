// Ranks of one process on CUDA devices without NCCL (two-GPU prefill, issue 44): any list of
// devices, the same one repeated included, so that the multi-GPU algorithms run and are tested on
// one GPU (two ranks as two streams and two sets of buffers). Each rank is driven by its own host
// thread and has its own stream (stream()).
//
// A collective is a host rendezvous (rendezvous.h, as InProcessGroup's) that only enqueues: each
// rank records an event after the work that wrote its send buffer, its stream waits for its
// peers' events and copies what it receives (cudaMemcpyPeerAsync: device to device, through the
// host where the devices have no peer access), then records a second event that the peers'
// streams wait for before they may overwrite their send buffers. The calls return with the copies
// enqueued, as NcclGroup's do; synchronize() waits for them under the group's timeout.
// reduce_scatter_sum adds the ranks' slices in rank order (FP32), bitwise what InProcessGroup and
// one process adding them in that order get.
//
// Built only with CUDA (HYMOE_HAVE_CUDA).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hymoe/engine/communicator.h"

namespace hymoe {

class DeviceGroup final : public CommunicatorGroup {
 public:
  // Throws hymoe::Error kInvalidArgument for an empty list, a device that does not exist or a
  // timeout that is not positive.
  explicit DeviceGroup(std::vector<int> devices, double timeout_s = 60.0);
  ~DeviceGroup() override;
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  int size() const override;
  int device(int rank) const override;
  Communicator& rank(int r) override;
  // Work already enqueued still runs.
  void abort(const std::string& why) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
