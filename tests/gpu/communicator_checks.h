// Checks every communicator over device buffers passes (NcclGroup, DeviceGroup): the collectives
// on random data with NaN-poisoned receive buffers against host-computed results, and striped
// attention's ring driver passing device KV. Each runs the group's ranks on threads.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hymoe/engine/communicator.h"
#include "hymoe/engine/context_parallel.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "../rank_threads.h"
#include "../test_seed.h"

namespace hymoe::test {

inline uint32_t comm_seed() { return static_cast<uint32_t>(test_seed()); }

// The copy done before it returns: the ranks' non-blocking streams do not wait for the legacy
// stream's pageable copies.
inline void upload(const std::vector<float>& host, gpu::DeviceBuffer& dev) {
  HYMOE_CUDA_CHECK(cudaMemcpy(dev.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  HYMOE_CUDA_CHECK(cudaDeviceSynchronize());
}

inline std::vector<float> download(const gpu::DeviceBuffer& dev, size_t n) {
  std::vector<float> out(n);
  HYMOE_CUDA_CHECK(cudaMemcpy(out.data(), dev.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

// The collectives on every rank of `group` against host-computed results. exact_sum: the
// reduce-scatter must equal the rank-order FP32 sum bitwise (NCCL's order is its own).
inline void check_collectives(CommunicatorGroup& group, bool exact_sum) {
  const int ranks = group.size();
  std::mt19937 rng(comm_seed());
  std::uniform_real_distribution<float> dist(-1, 1);
  const size_t n = 1000;
  std::vector<std::vector<float>> data(static_cast<size_t>(ranks), std::vector<float>(n * static_cast<size_t>(ranks)));
  for (auto& d : data)
    for (float& x : d) x = dist(rng);
  const std::vector<float> nan(n * static_cast<size_t>(ranks), std::numeric_limits<float>::quiet_NaN());
  on_ranks(ranks, [&](int r) {
    gpu::DeviceGuard guard(group.device(r));
    Communicator& c = group.rank(r);
    ASSERT_NE(c.stream(), nullptr);
    gpu::DeviceBuffer send(n * static_cast<size_t>(ranks) * sizeof(float)), recv(send.bytes());
    upload(data[static_cast<size_t>(r)], send);
    upload(nan, recv);
    c.all_gather(send.as<float>(), recv.as<float>(), n * sizeof(float));
    c.synchronize();
    auto got = download(recv, n * static_cast<size_t>(ranks));
    for (int p = 0; p < ranks; ++p)
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<size_t>(p) * n + i], data[static_cast<size_t>(p)][i]);
    upload(nan, recv);
    c.reduce_scatter_sum(send.as<float>(), recv.as<float>(), n);
    c.synchronize();
    got = download(recv, n);
    for (size_t i = 0; i < n; ++i) {
      float want = 0;
      for (int p = 0; p < ranks; ++p) want += data[static_cast<size_t>(p)][static_cast<size_t>(r) * n + i];
      if (exact_sum) {
        ASSERT_EQ(got[i], want) << "row " << i;
      } else {
        ASSERT_NEAR(got[i], want, 1e-5f);
      }
    }
    // A ring step: rank p sends p + 1 floats.
    const int next = (r + 1) % ranks, prev = (r - 1 + ranks) % ranks;
    upload(nan, recv);
    c.send_recv(send.as<float>(), (static_cast<size_t>(r) + 1) * sizeof(float), next, recv.as<float>(),
                (static_cast<size_t>(prev) + 1) * sizeof(float), prev);
    c.synchronize();
    got = download(recv, static_cast<size_t>(prev) + 2);
    for (int i = 0; i <= prev; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], data[static_cast<size_t>(prev)][static_cast<size_t>(i)]);
    EXPECT_TRUE(std::isnan(got[static_cast<size_t>(prev) + 1]));  // nothing past the count
    // all_to_all_v: rank p sends q + p + 1 floats to rank q from offset 3q.
    std::vector<size_t> sc, so, rc, ro;
    size_t at = 0;
    for (int q = 0; q < ranks; ++q) {
      sc.push_back(static_cast<size_t>(q + r + 1) * sizeof(float));
      so.push_back(static_cast<size_t>(3 * q) * sizeof(float));
      rc.push_back(static_cast<size_t>(r + q + 1) * sizeof(float));
      ro.push_back(at * sizeof(float));
      at += static_cast<size_t>(r + q + 1);
    }
    upload(nan, recv);
    c.all_to_all_v(send.data(), sc, so, recv.data(), rc, ro);
    c.synchronize();
    got = download(recv, at);
    at = 0;
    for (int q = 0; q < ranks; ++q) {
      for (size_t i = 0; i < static_cast<size_t>(r + q + 1); ++i)
        ASSERT_EQ(got[at + i], data[static_cast<size_t>(q)][static_cast<size_t>(3 * r) + i]);
      at += static_cast<size_t>(r + q + 1);
    }
  });
}

// The ring driver over device KV: each rank's attend sees the KV rows of every rank, its own
// first, each exactly as that rank holds them (rows tagged with their prompt row).
inline void check_striped_ring(CommunicatorGroup& group) {
  const int ranks = group.size();
  const ZigzagStripes z{103, ranks};
  const size_t row_floats = 9;
  on_ranks(ranks, [&](int r) {
    gpu::DeviceGuard guard(group.device(r));
    Communicator& c = group.rank(r);
    std::vector<float> mine(static_cast<size_t>(z.local_rows(r)) * row_floats);
    for (int64_t i = 0; i < z.local_rows(r); ++i)
      for (size_t k = 0; k < row_floats; ++k) mine[static_cast<size_t>(i) * row_floats + k] = static_cast<float>(z.row_of(r, i) * 16 + static_cast<int64_t>(k));
    gpu::DeviceBuffer own(std::max<size_t>(mine.size(), 1) * sizeof(float));
    upload(mine, own);
    const size_t ring_bytes = static_cast<size_t>(z.max_local_rows()) * row_floats * sizeof(float);
    gpu::DeviceBuffer ring0(ring_bytes), ring1(ring_bytes);
    int calls = 0;
    striped_attention_ring(c, z, row_floats * sizeof(float),
                           {static_cast<const std::byte*>(own.data()), mine.size() * sizeof(float)},
                           {std::span<std::byte>(static_cast<std::byte*>(ring0.data()), ring_bytes),
                            std::span<std::byte>(static_cast<std::byte*>(ring1.data()), ring_bytes)},
                           [&](std::span<const std::byte> kv, int source) {
                             EXPECT_EQ(source, (r - calls + ranks) % ranks);
                             ++calls;
                             c.synchronize();
                             std::vector<float> host(kv.size() / sizeof(float));
                             HYMOE_CUDA_CHECK(cudaMemcpy(host.data(), kv.data(), kv.size(), cudaMemcpyDeviceToHost));
                             ASSERT_EQ(static_cast<int64_t>(host.size()), z.local_rows(source) * static_cast<int64_t>(row_floats));
                             for (int64_t i = 0; i < z.local_rows(source); ++i)
                               ASSERT_EQ(host[static_cast<size_t>(i) * row_floats + 3], static_cast<float>(z.row_of(source, i) * 16 + 3));
                           });
    EXPECT_EQ(calls, ranks);
  });
}

}  // namespace hymoe::test
