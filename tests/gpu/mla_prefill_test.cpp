// MLA prefill attention against a float64 reference: causal masks, chunked prefill over a cache
// (past > 0), cached keys past the causal limit, kv_b's interleaved k_nope | v layout; hymoe's
// kernels and cuDNN's fused attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "hymoe/gpu/mla_prefill.h"
#include "hymoe/gpu/mla_prefill_cudnn.h"

namespace hymoe::gpu {
namespace {

struct PrefillCase {
  int tokens, past, kv_tokens, heads;
};
void PrintTo(const PrefillCase& c, std::ostream* os) {
  *os << c.tokens << " tokens after " << c.past << ", " << c.kv_tokens << " keys, " << c.heads << " heads";
}

// Random inputs in kv_b's layout (per head k_nope | v) and the float64 reference output.
struct PrefillData {
  std::vector<Bf16> q, kv, kpe;
  float scale = 0.0f;
  std::vector<double> ref;
  std::vector<double> lse;  // [heads, tokens]: log-sum-exp of each row's scaled visible scores
};

PrefillData make_data(const PrefillCase& c) {
  auto rng = test::make_rng();
  const int H = c.heads;
  PrefillData d;
  d.q = test::random_bf16(size_t(c.tokens) * H * kMlaQkDim, rng);
  d.kv = test::random_bf16(size_t(c.kv_tokens) * H * 256, rng);
  d.kpe = test::random_bf16(size_t(c.kv_tokens) * 64, rng);
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  d.scale = static_cast<float>(mscale * mscale / std::sqrt(192.0));
  d.ref.assign(size_t(c.tokens) * H * kMlaVDim, 0.0);
  d.lse.assign(size_t(c.tokens) * H, 0.0);
  std::vector<double> score;
  auto f = [](const std::vector<Bf16>& v, size_t i) { return double{v[i].to_float()}; };
  for (int i = 0; i < c.tokens; ++i) {
    const int keys = std::min(c.kv_tokens, c.past + i + 1);
    for (int h = 0; h < H; ++h) {
      score.assign(keys, 0.0);
      double mx = -INFINITY;
      for (int j = 0; j < keys; ++j) {
        double s = 0.0;
        const size_t qo = (size_t(i) * H + h) * kMlaQkDim, ko = (size_t(j) * H + h) * 256;
        for (int x = 0; x < kMlaNopeDim; ++x) s += f(d.q, qo + x) * f(d.kv, ko + x);
        for (int x = 0; x < 64; ++x) s += f(d.q, qo + kMlaNopeDim + x) * f(d.kpe, size_t(j) * 64 + x);
        score[j] = s * d.scale;
        mx = std::max(mx, score[j]);
      }
      double sum = 0.0;
      for (double& s : score) sum += (s = std::exp(s - mx));
      d.lse[size_t(h) * c.tokens + i] = mx + std::log(sum);
      double* o = &d.ref[(size_t(i) * H + h) * kMlaVDim];
      for (int j = 0; j < keys; ++j)
        for (int x = 0; x < kMlaVDim; ++x)
          o[x] += score[j] / sum * f(d.kv, (size_t(j) * H + h) * 256 + kMlaNopeDim + x);
    }
  }
  return d;
}

// Device copies of the inputs and the parameters that read them in place.
struct DeviceInputs {
  DeviceBuffer q, kv, kpe;
  MlaPrefillParams p;
};

DeviceInputs upload(const PrefillCase& c, const PrefillData& d, Stream& stream) {
  DeviceInputs in{test::to_device(d.q, stream), test::to_device(d.kv, stream),
                  test::to_device(d.kpe, stream), {}};
  const int H = c.heads;
  MlaPrefillParams& p = in.p;
  p.q = in.q.as<Bf16>();
  p.k_nope = in.kv.as<Bf16>();
  p.v = in.kv.as<Bf16>() + kMlaNopeDim;
  p.k_pe = in.kpe.as<Bf16>();
  p.tokens = c.tokens;
  p.kv_tokens = c.kv_tokens;
  p.heads = H;
  p.past = c.past;
  p.q_token_stride = int64_t{H} * kMlaQkDim;
  p.q_head_stride = kMlaQkDim;
  p.k_token_stride = p.v_token_stride = int64_t{H} * 256;
  p.k_head_stride = p.v_head_stride = 256;
  p.k_pe_token_stride = 64;
  p.out_token_stride = int64_t{H} * kMlaVDim;
  p.out_head_stride = kMlaVDim;
  p.softmax_scale = d.scale;
  return in;
}

class MlaPrefillTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(MlaPrefillTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  const PrefillCase c = GetParam();
  Stream stream;
  const PrefillData d = make_data(c);
  DeviceInputs in = upload(c, d, stream);
  const size_t n = size_t(c.tokens) * c.heads * kMlaVDim;
  // Both implementations, each on a freshly poisoned output.
  for (const MlaPrefillImpl impl : {MlaPrefillImpl::kTensorCores, MlaPrefillImpl::kCudaCores}) {
    auto dout = test::poisoned<Bf16>(n, stream);
    in.p.out = dout.as<Bf16>();
    in.p.impl = impl;
    mla_prefill(in.p, stream);
    // FP32 scores and accumulation, BF16 output rounding (2^-9 relative); the tensor-core
    // kernel also rounds the probabilities to BF16 before P V (another ~2^-9): 5e-3.
    EXPECT_LT(test::normalized_error(test::to_float(test::to_host<Bf16>(dout, n, stream)), d.ref),
              5e-3)
        << (impl == MlaPrefillImpl::kTensorCores ? "tensor cores" : "CUDA cores");
  }
}

// cuDNN's fused attention through the backend graph (skipped where cuDNN is not installed).
TEST_P(MlaPrefillTest, CudnnMatchesReference) {
  HYMOE_REQUIRE_GPU();
  std::string why;
  if (!MlaPrefillCudnn::available(&why)) GTEST_SKIP() << "cuDNN: " << why;
  const PrefillCase c = GetParam();
  Stream stream;
  const PrefillData d = make_data(c);
  DeviceInputs in = upload(c, d, stream);
  const size_t n = size_t(c.tokens) * c.heads * kMlaVDim;
  // The heuristics' first engine, and autotuning (its first run executes every engine cuDNN
  // offers, the last one's output standing; the second the fastest).
  for (const bool autotune : {false, true}) {
    MlaPrefillCudnn cudnn(nullptr, autotune);
    ASSERT_TRUE(cudnn.supports(in.p, &why)) << why;
    // Twice on fresh poison: the second run takes the cached plan and must write everything.
    for (int run = 0; run < 2; ++run) {
      auto dout = test::poisoned<Bf16>(n, stream);
      in.p.out = dout.as<Bf16>();
      cudnn.run(in.p, stream);
      // Same rounding as the tensor-core kernel (BF16 probabilities, BF16 output): 5e-3.
      EXPECT_LT(
          test::normalized_error(test::to_float(test::to_host<Bf16>(dout, n, stream)), d.ref),
          5e-3)
          << "run " << run << (autotune ? " autotuned over " : " engines offered: ")
          << cudnn.engines(in.p);
    }
    EXPECT_EQ(cudnn.plans(), 1);
  }
}

// The same inputs in a [kv, heads, 320] k_nope | k_pe | v layout (k_pe copied to every head):
// every implementation through k_pe_head_stride, cuDNN reading K in place (no gather).
TEST_P(MlaPrefillTest, PerHeadRopeKeysInPlace) {
  HYMOE_REQUIRE_GPU();
  const PrefillCase c = GetParam();
  Stream stream;
  const PrefillData d = make_data(c);
  const int H = c.heads;
  constexpr int kRow = 320;
  std::vector<Bf16> kv(size_t(c.kv_tokens) * H * kRow);
  for (int j = 0; j < c.kv_tokens; ++j)
    for (int h = 0; h < H; ++h) {
      Bf16* row = &kv[(size_t(j) * H + h) * kRow];
      const Bf16* src = &d.kv[(size_t(j) * H + h) * 256];
      std::copy(src, src + kMlaNopeDim, row);                             // k_nope
      std::copy(&d.kpe[size_t(j) * 64], &d.kpe[size_t(j) * 64] + 64, row + kMlaNopeDim);  // k_pe
      std::copy(src + kMlaNopeDim, src + 256, row + kMlaQkDim);           // v
    }
  DeviceInputs in = upload(c, d, stream);
  auto dkv = test::to_device(kv, stream);
  MlaPrefillParams p = in.p;
  p.k_nope = dkv.as<Bf16>();
  p.k_pe = dkv.as<Bf16>() + kMlaNopeDim;
  p.v = dkv.as<Bf16>() + kMlaQkDim;
  p.k_token_stride = p.k_pe_token_stride = p.v_token_stride = int64_t{H} * kRow;
  p.k_head_stride = p.k_pe_head_stride = p.v_head_stride = kRow;
  const size_t n = size_t(c.tokens) * H * kMlaVDim;
  std::string why;
  const bool cudnn_ok = MlaPrefillCudnn::available(&why);
  std::unique_ptr<MlaPrefillCudnn> cudnn = cudnn_ok ? std::make_unique<MlaPrefillCudnn>() : nullptr;
  for (int impl = 0; impl < 3; ++impl) {
    if (impl == 2 && !cudnn) continue;  // cuDNN absent: the kernels are still checked
    auto dout = test::poisoned<Bf16>(n, stream);
    p.out = dout.as<Bf16>();
    p.impl = impl == 0 ? MlaPrefillImpl::kTensorCores : MlaPrefillImpl::kCudaCores;
    if (impl == 2) {
      cudnn->run(p, stream);
    } else {
      mla_prefill(p, stream);
    }
    EXPECT_LT(test::normalized_error(test::to_float(test::to_host<Bf16>(dout, n, stream)), d.ref),
              5e-3)
        << (impl == 0 ? "tensor cores" : impl == 1 ? "CUDA cores" : "cuDNN, K in place");
  }
}

// The keys cut into windows (not a multiple of anything), each attended by the rows that see it
// (a window past a row's causal limit is skipped for it), merged by log-sum-exp: the attention
// over all keys, for every implementation; the first window's lse against the reference.
TEST_P(MlaPrefillTest, KeyWindowsMergedByLogSumExp) {
  HYMOE_REQUIRE_GPU();
  const PrefillCase c = GetParam();
  Stream stream;
  const PrefillData d = make_data(c);
  DeviceInputs in = upload(c, d, stream);
  const int H = c.heads, end = std::min(c.kv_tokens, c.past + c.tokens);
  const size_t n = size_t(c.tokens) * H * kMlaVDim, nl = size_t(c.tokens) * H;
  std::string why;
  std::unique_ptr<MlaPrefillCudnn> cudnn =
      MlaPrefillCudnn::available(&why) ? std::make_unique<MlaPrefillCudnn>() : nullptr;
  // At most 8 windows: each merge rounds the output to BF16 again (a thousand windows of 61 keys
  // over 64K keys drift to 4e-2), and the prefill windows are thousands of keys wide.
  for (const int window : {end, (end + 2) / 3, std::max(61, (end + 7) / 8)}) {
    for (int impl = 0; impl < 3; ++impl) {
      if (impl == 2 && !cudnn) continue;
      const char* name = impl == 0 ? "tensor cores" : impl == 1 ? "CUDA cores" : "cuDNN";
      auto acc = test::poisoned<Bf16>(n, stream), part = test::poisoned<Bf16>(n, stream);
      auto acc_lse = test::poisoned<float>(nl, stream), part_lse = test::poisoned<float>(nl, stream);
      for (int k0 = 0; k0 < end; k0 += window) {
        const int k1 = std::min(end, k0 + window), r0 = std::max(0, k0 - c.past);
        if (r0 >= c.tokens) break;
        MlaPrefillParams p = in.p;
        p.q += int64_t{r0} * p.q_token_stride;
        p.k_nope += int64_t{k0} * p.k_token_stride;
        p.v += int64_t{k0} * p.v_token_stride;
        p.k_pe += int64_t{k0} * p.k_pe_token_stride;
        p.tokens = c.tokens - r0;
        p.kv_tokens = k1 - k0;
        p.past = c.past + r0 - k0;
        const bool first = k0 == 0;
        p.out = (first ? acc : part).as<Bf16>() + int64_t{r0} * p.out_token_stride;
        p.lse = (first ? acc_lse : part_lse).as<float>();
        p.impl = impl == 1 ? MlaPrefillImpl::kCudaCores : MlaPrefillImpl::kTensorCores;
        if (impl == 2) {
          ASSERT_TRUE(cudnn->supports(p, &why)) << why;
          cudnn->run(p, stream);
        } else {
          mla_prefill(p, stream);
        }
        if (first) {
          if (window == end) {
            std::vector<float> got = test::to_host<float>(acc_lse, nl, stream);
            for (size_t i = 0; i < nl; ++i)
              ASSERT_NEAR(got[i], d.lse[i], 1e-3 * std::max(1.0, std::abs(d.lse[i]))) << name << " lse " << i;
          }
          continue;
        }
        mla_merge_attention({.out = acc.as<Bf16>() + int64_t{r0} * p.out_token_stride, .lse = acc_lse.as<float>() + r0,
                             .part = p.out,
                             .part_lse = part_lse.as<float>(), .rows = p.tokens, .heads = H,
                             .out_token_stride = p.out_token_stride, .out_head_stride = p.out_head_stride,
                             .part_token_stride = p.out_token_stride, .part_head_stride = p.out_head_stride,
                             .lse_head_stride = c.tokens, .part_lse_head_stride = p.tokens},
                            stream);
      }
      // BF16 partial outputs, each merge rounding again: 8e-3.
      EXPECT_LT(test::normalized_error(test::to_float(test::to_host<Bf16>(acc, n, stream)), d.ref), 8e-3)
          << name << ", windows of " << window;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MlaPrefillTest,
                         ::testing::Values(PrefillCase{100, 0, 100, 3},    // causal prefill
                                           PrefillCase{37, 200, 237, 2},   // chunked prefill
                                           PrefillCase{1, 0, 1, 4},        // one token
                                           PrefillCase{300, 5, 320, 2},    // keys past the limit
                                           PrefillCase{129, 0, 129, 2},    // ragged query tile
                                           PrefillCase{64, 1000, 1064, 1},  // long cache, one tile
                                           PrefillCase{513, 70, 600, 3},   // tiles off the diagonal
                                           PrefillCase{70, 130, 200, 128},  // all 128 heads
                                           PrefillCase{6, 65530, 65536, 2}));  // a 64K context

}  // namespace
}  // namespace hymoe::gpu
