// Striped context-parallel attention on the GPU (DslpAttention, issue 44): two and three ranks on
// one GPU (DeviceGroup), a prompt whose length is no multiple of the stripes, windows shorter than
// a stripe, against one causal attention over the whole prompt (the same kv_b expansion, one
// prefill kernel call); every source's latent rows handed to the KV sink once, as its rank holds
// them. Random queries and latent rows, the tiny checkpoint's kv_b with DeepSeek-V3's attention
// shapes. Skipped without a CUDA device.
#include "hymoe/engine/dslp_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/engine/device_communicator.h"
#include "hymoe/engine/gpu_linear.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/layer_kernels.h"
#include "hymoe/gpu/mla_prefill.h"
#include "hymoe/gpu/stream.h"
#include "../rank_threads.h"
#include "../test_seed.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16(normal(rng));
  return v;
}

void striped_matches_one_attention(int ranks) {
  test::TinyModel model("hymoe_dslp_attn", 779, 2048, &test::deepseek_prefill_attention);
  const ModelConfig& c = model.store->config();
  GpuModelOptions mo;
  mo.kv_cache_bytes = 16 << 20;
  mo.prefill_weights = true;
  GpuModel gm(*model.store, mo);
  const DevFp8& kv_b = gm.layer(0).kv_b;
  const int64_t N = 45, H = c.num_attention_heads, width = c.kv_lora_rank + c.qk_rope_head_dim;
  const int64_t qk = gpu::kMlaQkDim, vd = gpu::kMlaVDim, kvw = H * (128 + vd), kvw3 = H * (qk + vd);
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()) + static_cast<uint32_t>(ranks));
  const auto q = random_bf16(static_cast<size_t>(N * H * qk), rng, 1.0f);
  const auto latent = random_bf16(static_cast<size_t>(N * width), rng, 1.0f);

  // The reference: every key expanded, one causal call over the whole prompt.
  std::vector<uint16_t> ref(static_cast<size_t>(N * H * vd));
  {
    gpu::Stream s;
    gpu::CublasLt lt;
    GpuLinear linear(lt, N, c.kv_lora_rank, nullptr);
    gpu::DeviceBuffer dq(q.size() * 2), dl(latent.size() * 2), dkvb(static_cast<size_t>(N * kvw) * 2),
        dkeys(static_cast<size_t>(N * kvw3) * 2), dout(ref.size() * 2);
    dq.copy_from_host(q.data(), q.size() * 2, s);
    dl.copy_from_host(latent.data(), latent.size() * 2, s);
    linear.run(kv_b, dl.as<gpu::Bf16>(), width, N, dkvb.as<gpu::Bf16>(), kvw, s);
    gpu::mla_assemble_kv({.kvb = dkvb.as<gpu::Bf16>(), .latent = dl.as<gpu::Bf16>(), .out = dkeys.as<gpu::Bf16>(),
                          .tokens = static_cast<int>(N), .heads = static_cast<int>(H), .nope = 128, .rope = 64,
                          .vdim = static_cast<int>(vd), .lora = static_cast<int>(c.kv_lora_rank), .latent_stride = width},
                         s);
    const gpu::MlaPrefillParams pp =
        gpu::mla_prefill_over_assembled(dq.as<gpu::Bf16>(), dkeys.as<gpu::Bf16>(), dout.as<gpu::Bf16>(), static_cast<int>(N),
                                        static_cast<int>(N), static_cast<int>(H), 0, gm.softmax_scale());
    gpu::mla_prefill(pp, s);
    dout.copy_to_host(ref.data(), ref.size() * 2, s);
    s.synchronize();
  }

  const ZigzagStripes z{N, ranks};
  std::vector<int> devices(static_cast<size_t>(ranks), 0);
  DeviceGroup group(devices, 120.0);
  std::vector<std::vector<uint16_t>> got(static_cast<size_t>(ranks));
  std::vector<std::vector<int>> sunk(static_cast<size_t>(ranks));  // per rank: the sources its sink saw
  std::vector<size_t> received(static_cast<size_t>(ranks));
  test::on_ranks(ranks, [&](int r) {
    gpu::Stream s;
    gpu::CublasLt lt;
    DslpAttention attn(c, lt, z.max_local_rows(), 8, nullptr);  // windows of 8 keys: several a stripe
    const int64_t mine = z.local_rows(r);
    std::vector<uint16_t> qr(static_cast<size_t>(mine * H * qk)), lr(static_cast<size_t>(mine * width));
    for (int64_t i = 0; i < mine; ++i) {
      const int64_t row = z.row_of(r, i);
      std::copy_n(q.begin() + row * H * qk, H * qk, qr.begin() + i * H * qk);
      std::copy_n(latent.begin() + row * width, width, lr.begin() + i * width);
    }
    gpu::DeviceBuffer dq(std::max<size_t>(qr.size(), 1) * 2), dl(std::max<size_t>(lr.size(), 1) * 2),
        dout(static_cast<size_t>(std::max<int64_t>(mine, 1) * H * vd) * 2);
    dq.copy_from_host(qr.data(), qr.size() * 2, s);
    dl.copy_from_host(lr.data(), lr.size() * 2, s);
    dout.fill_bytes(0xFF, s);  // NaN: a row the attention does not set shows
    bool sink_ok = true;
    DslpAttention::Params p;
    p.stripes = &z;
    p.q = dq.as<gpu::Bf16>();
    p.latent = dl.as<gpu::Bf16>();
    p.kv_b = &kv_b;
    p.softmax_scale = gm.softmax_scale();
    p.out = dout.as<gpu::Bf16>();
    p.kv_sink = [&](const gpu::Bf16* rows, int source, cudaStream_t st) {
      sunk[static_cast<size_t>(r)].push_back(source);
      std::vector<uint16_t> h(static_cast<size_t>(z.local_rows(source) * width));
      HYMOE_CUDA_CHECK(cudaMemcpyAsync(h.data(), rows, h.size() * 2, cudaMemcpyDeviceToHost, st));
      HYMOE_CUDA_CHECK(cudaStreamSynchronize(st));
      for (int64_t i = 0; i < z.local_rows(source); ++i)
        for (int64_t k = 0; k < width; ++k)
          sink_ok = sink_ok && h[static_cast<size_t>(i * width + k)] == latent[static_cast<size_t>(z.row_of(source, i) * width + k)];
    };
    attn.run(group.rank(r), p, s);
    std::vector<uint16_t> o(static_cast<size_t>(mine * H * vd));
    dout.copy_to_host(o.data(), o.size() * 2, s);
    s.synchronize();
    EXPECT_TRUE(sink_ok) << "rank " << r << ": a source's rows differ from what that rank holds";
    received[static_cast<size_t>(r)] = attn.received_bytes();
    got[static_cast<size_t>(r)] = std::move(o);
  });
  double dn = 0, dd = 0;
  for (int r = 0; r < ranks; ++r) {
    std::vector<int> want;
    for (int k = 0; k < ranks; ++k) want.push_back((r - k + ranks) % ranks);  // own first, then the ring's order
    EXPECT_EQ(sunk[static_cast<size_t>(r)], want) << "rank " << r;
    EXPECT_EQ(received[static_cast<size_t>(r)], static_cast<size_t>((N - z.local_rows(r)) * width) * 2) << "rank " << r;
    for (int64_t i = 0; i < z.local_rows(r); ++i) {
      const int64_t row = z.row_of(r, i);
      for (int64_t k = 0; k < H * vd; ++k) {
        const double u = bf16_to_float(got[static_cast<size_t>(r)][static_cast<size_t>(i * H * vd + k)]);
        const double v = bf16_to_float(ref[static_cast<size_t>(row * H * vd + k)]);
        ASSERT_FALSE(std::isnan(u)) << "rank " << r << " row " << row << " value " << k;
        dn += (u - v) * (u - v);
        dd += v * v;
      }
    }
  }
  const double err = std::sqrt(dn / dd);
  std::printf("striped attention, %d ranks, windows of 8 keys, vs one causal call: normalised difference %.3e\n", ranks, err);
  EXPECT_GT(dd, 0.0);
  EXPECT_LT(err, 1e-2);  // a few BF16 merges a row
}

TEST(DslpAttention, TwoRanksOnOneGpuMatchOneCausalAttention) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  striped_matches_one_attention(2);
}

TEST(DslpAttention, ThreeRanksOnOneGpuMatchOneCausalAttention) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  striped_matches_one_attention(3);
}

TEST(DslpAttention, RefusesOtherHeadShapes) {
  ModelConfig c = preset_config("tiny");
  c.qk_nope_head_dim = 64;
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device (cuBLASLt needs one)";
  gpu::CublasLt lt;
  EXPECT_THROW(DslpAttention(c, lt, 16, 16, nullptr), Error);
}

}  // namespace
}  // namespace hymoe
