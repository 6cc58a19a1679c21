// A CPU model of an mbarrier for the protocol tests of the wgmma kernels (wgmma_pipeline_test,
// mla_pingpong_protocol_test): phase P completes when `count` arrivals happened in it;
// try_wait.parity q is true once the phase of parity q completed, i.e. q != P % 2 for a barrier
// in phase P.
#pragma once

#include <cstdint>

namespace hymoe::gpu::wgmma::test_model {

struct MBarrier {
  int count = 0, pending = 0;
  uint32_t phase = 0;
  explicit MBarrier(int n) : count(n), pending(n) {}
  void arrive() {
    if (--pending == 0) {
      ++phase;
      pending = count;
    }
  }
  bool try_wait_parity(uint32_t q) const { return (phase & 1u) != q; }
};

}  // namespace hymoe::gpu::wgmma::test_model
