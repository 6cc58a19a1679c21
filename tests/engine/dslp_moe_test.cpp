// SmallEP on the GPU (DslpMoe, issue 44): two ranks on one GPU (DeviceGroup, two streams, two
// rings, each streaming only its own half of the experts) against one SlpMoe over the whole
// prompt, on a generated tiny checkpoint; a prompt length that is no multiple of the stripes, the
// routing given per prompt row. Equal up to the grouped GEMM's accumulation order (its tile shape
// follows a batch's row count, as between SLP's ring lengths). Skipped without a CUDA device.
#include "hymoe/engine/dslp_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "hymoe/common/numeric.h"
#include "hymoe/engine/context_parallel.h"
#include "hymoe/engine/device_communicator.h"
#include "hymoe/engine/slp_moe.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/stream.h"
#include "../rank_threads.h"
#include "../test_seed.h"
#include "engine_test_util.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

TEST(DslpMoe, TwoRanksOnOneGpuMatchOneSlpMoe) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  test::TinyModel model("hymoe_dslp_moe", 778, 2048);
  const ModelConfig& c = model.store->config();
  const ModelWeights& w = *model.weights;
  const int N = 41, K = static_cast<int>(c.num_experts_per_tok), E = static_cast<int>(c.n_routed_experts), R = 2;
  const int64_t H = c.hidden_size;
  int64_t layer = -1;
  for (size_t l = 0; l < w.layers.size() && layer < 0; ++l)
    if (w.layers[l].moe) layer = static_cast<int64_t>(l);
  ASSERT_GE(layer, 0);
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(N * H));
  for (auto& v : x) v = float_to_bf16(normal(rng));
  auto [ids, wts] = test::random_routing(N, E, K, rng);

  // One process, every expert: the reference.
  std::vector<float> ref(x.size());
  {
    gpu::Stream s;
    gpu::DeviceBuffer dx(x.size() * 2), dids(ids.size() * 4), dw(wts.size() * 4), dout(x.size() * 4);
    dx.copy_from_host(x.data(), x.size() * 2, s);
    dids.copy_from_host(ids.data(), ids.size() * 4, s);
    dw.copy_from_host(wts.data(), wts.size() * 4, s);
    gpu::CublasLt lt;
    SlpMoe moe(c, lt, N, nullptr);
    ExpertRing ring(c, E, nullptr);
    ExpertStreamer streamer(ring, w, 0);
    std::vector<ExpertStreamer::Item> schedule;
    for (int32_t e = 0; e < E; ++e) schedule.push_back({layer, e});
    streamer.start(schedule);
    moe.run({.x = dx.as<gpu::Bf16>(), .topk_ids = dids.as<int32_t>(), .topk_weights = dw.as<float>(),
             .out = dout.as<float>(), .tokens = N},
            streamer, ring, s);
    dout.copy_to_host(ref.data(), ref.size() * 4, s);
    s.synchronize();
    streamer.finish();
  }

  const ZigzagStripes z{N, R};
  const int64_t pad = z.max_local_rows();
  DeviceGroup group({0, 0}, 120.0);
  std::vector<std::vector<float>> got(R);
  std::vector<SmallEpTraffic> traffic(R);
  std::vector<int64_t> begins(R), ends(R);
  test::on_ranks(R, [&](int r) {
    gpu::Stream s;
    gpu::CublasLt lt;
    DslpMoe moe(c, lt, r, R, pad, nullptr);
    begins[static_cast<size_t>(r)] = moe.expert_begin();
    ends[static_cast<size_t>(r)] = moe.expert_end();
    // The rank's rows, and the routing of every gathered row (rank-major, padding: weight 0).
    const int64_t mine = z.local_rows(r);
    std::vector<uint16_t> xr(static_cast<size_t>(mine * H));
    for (int64_t i = 0; i < mine; ++i)
      std::copy_n(x.begin() + z.row_of(r, i) * H, H, xr.begin() + i * H);
    std::vector<int32_t> gid(static_cast<size_t>(R * pad * K));
    std::vector<float> gw(gid.size(), 0.0f);
    for (int q = 0; q < R; ++q) {
      for (int64_t i = 0; i < pad; ++i) {
        for (int k = 0; k < K; ++k) {
          const size_t at = static_cast<size_t>(((q * pad) + i) * K + k);
          if (i < z.local_rows(q)) {
            const size_t from = static_cast<size_t>(z.row_of(q, i) * K + k);
            gid[at] = ids[from];
            gw[at] = wts[from];
          } else {
            gid[at] = k;
          }
        }
      }
    }
    gpu::DeviceBuffer dx(std::max<size_t>(xr.size(), 1) * 2), dgid(gid.size() * 4), dgw(gw.size() * 4),
        dout(static_cast<size_t>(pad * H) * 4);
    dx.copy_from_host(xr.data(), xr.size() * 2, s);
    dgid.copy_from_host(gid.data(), gid.size() * 4, s);
    dgw.copy_from_host(gw.data(), gw.size() * 4, s);
    dout.fill_bytes(0xFF, s);  // NaN: a row the stage does not set shows
    ExpertRing ring(c, 3, nullptr);  // shorter than the rank's share: streamed in batches
    ExpertStreamer streamer(ring, w, 0);
    std::vector<ExpertStreamer::Item> schedule;
    for (int64_t e = moe.expert_begin(); e < moe.expert_end(); ++e) schedule.push_back({layer, static_cast<int32_t>(e)});
    streamer.start(schedule);
    int64_t routed_rows = -1;
    const auto route = [&](const gpu::Bf16*, int64_t rows, int32_t* tid, float* tw, cudaStream_t st) {
      routed_rows = rows;
      HYMOE_CUDA_CHECK(cudaMemcpyAsync(tid, dgid.data(), gid.size() * 4, cudaMemcpyDeviceToDevice, st));
      HYMOE_CUDA_CHECK(cudaMemcpyAsync(tw, dgw.data(), gw.size() * 4, cudaMemcpyDeviceToDevice, st));
    };
    traffic[static_cast<size_t>(r)] = moe.run(group.rank(r), {.x = dx.as<gpu::Bf16>(), .local_rows = mine, .pad = pad,
                                                              .out = dout.as<float>()},
                                              route, streamer, ring, s);
    EXPECT_EQ(routed_rows, R * pad);
    std::vector<float> o(static_cast<size_t>(pad * H));
    dout.copy_to_host(o.data(), o.size() * 4, s);
    s.synchronize();
    streamer.finish();
    got[static_cast<size_t>(r)] = std::move(o);
  });
  // The ranks' experts: contiguous, disjoint, every one.
  EXPECT_EQ(begins[0], 0);
  EXPECT_EQ(ends[0], begins[1]);
  EXPECT_EQ(ends[1], E);
  double dn = 0, dd = 0;
  for (int r = 0; r < R; ++r) {
    for (int64_t i = 0; i < z.local_rows(r); ++i) {
      const int64_t row = z.row_of(r, i);
      for (int64_t col = 0; col < H; ++col) {
        const double u = got[static_cast<size_t>(r)][static_cast<size_t>(i * H + col)];
        const double v = ref[static_cast<size_t>(row * H + col)];
        ASSERT_FALSE(std::isnan(u)) << "rank " << r << " row " << row << " column " << col;
        dn += (u - v) * (u - v);
        dd += v * v;
      }
    }
    EXPECT_EQ(traffic[static_cast<size_t>(r)].gathered_bytes, static_cast<size_t>(pad * H) * 2);
    EXPECT_EQ(traffic[static_cast<size_t>(r)].scattered_bytes, static_cast<size_t>(pad * H) * 4);
  }
  const double err = std::sqrt(dn / dd);
  std::printf("DSLP MoE (2 ranks) vs one SlpMoe: normalised difference %.3e\n", err);
  EXPECT_GT(dd, 0.0);
  EXPECT_LT(err, 1e-2);
}

}  // namespace
}  // namespace hymoe
