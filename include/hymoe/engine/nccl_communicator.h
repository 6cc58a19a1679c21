// NCCL ranks for two-GPU prefill (DSLP, issue 44): one process, one rank per listed device
// (ncclCommInitAll), each rank driven by its own host thread. Built where CUDA ships NCCL.
//
// Calls enqueue on the rank's stream (stream()) and return; synchronize() waits for them, polling
// NCCL's asynchronous error and bounded by the group's timeout, so that a failed or lost peer
// fails the rank's work (kUnavailable) instead of hanging it: the group is then aborted
// (ncclCommAbort on every rank) and every later call throws. Sizes are the caller's promise (NCCL
// does not check that a sender's count equals its receiver's; InProcessGroup does, in tests).
// reduce_scatter_sum sums in NCCL's order (deterministic for one topology, not rank order).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hymoe/engine/communicator.h"

namespace hymoe {

class NcclGroup final : public CommunicatorGroup {
 public:
  // Throws hymoe::Error: kInvalidArgument for an empty or repeated device list, kUnavailable
  // when NCCL cannot set the ranks up (the message says why).
  explicit NcclGroup(std::vector<int> devices, double timeout_s = 60.0);
  ~NcclGroup() override;
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const override;
  int device(int rank) const override;
  Communicator& rank(int r) override;
  // Aborts every rank's communicator (ncclCommAbort: their enqueued work may never finish).
  void abort(const std::string& why) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
