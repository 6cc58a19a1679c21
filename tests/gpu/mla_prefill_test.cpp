// MLA prefill attention against a float64 reference: causal masks, chunked prefill over a cache
// (past > 0), cached keys past the causal limit, kv_b's interleaved k_nope | v layout.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "gpu_test_util.h"
#include "hymoe/gpu/mla_prefill.h"

namespace hymoe::gpu {
namespace {

struct PrefillCase {
  int tokens, past, kv_tokens, heads;
};
void PrintTo(const PrefillCase& c, std::ostream* os) {
  *os << c.tokens << " tokens after " << c.past << ", " << c.kv_tokens << " keys, " << c.heads << " heads";
}

class MlaPrefillTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(MlaPrefillTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  const PrefillCase c = GetParam();
  auto rng = test::make_rng();
  Stream stream;
  const int H = c.heads;
  const auto q = test::random_bf16(size_t(c.tokens) * H * kMlaQkDim, rng);
  const auto kv = test::random_bf16(size_t(c.kv_tokens) * H * 256, rng);  // per head: k_nope | v
  const auto kpe = test::random_bf16(size_t(c.kv_tokens) * 64, rng);
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  const float scale = static_cast<float>(mscale * mscale / std::sqrt(192.0));
  auto dq = test::to_device(q, stream);
  auto dkv = test::to_device(kv, stream);
  auto dkpe = test::to_device(kpe, stream);
  MlaPrefillParams p;
  p.q = dq.as<Bf16>();
  p.k_nope = dkv.as<Bf16>();
  p.v = dkv.as<Bf16>() + kMlaNopeDim;
  p.k_pe = dkpe.as<Bf16>();
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
  p.softmax_scale = scale;
  // Both implementations, each on a freshly poisoned output.
  std::vector<std::vector<float>> outs;
  for (const MlaPrefillImpl impl : {MlaPrefillImpl::kTensorCores, MlaPrefillImpl::kCudaCores}) {
    auto dout = test::poisoned<Bf16>(size_t(c.tokens) * H * kMlaVDim, stream);
    p.out = dout.as<Bf16>();
    p.impl = impl;
    mla_prefill(p, stream);
    outs.push_back(test::to_float(test::to_host<Bf16>(dout, size_t(c.tokens) * H * kMlaVDim, stream)));
  }
  const std::vector<float>& out = outs[0];

  std::vector<double> ref(out.size(), 0.0), score;
  auto f = [](const std::vector<Bf16>& v, size_t i) { return double{v[i].to_float()}; };
  for (int i = 0; i < c.tokens; ++i) {
    const int keys = std::min(c.kv_tokens, c.past + i + 1);
    for (int h = 0; h < H; ++h) {
      score.assign(keys, 0.0);
      double mx = -INFINITY;
      for (int j = 0; j < keys; ++j) {
        double s = 0.0;
        const size_t qo = (size_t(i) * H + h) * kMlaQkDim, ko = (size_t(j) * H + h) * 256;
        for (int d = 0; d < kMlaNopeDim; ++d) s += f(q, qo + d) * f(kv, ko + d);
        for (int d = 0; d < 64; ++d) s += f(q, qo + kMlaNopeDim + d) * f(kpe, size_t(j) * 64 + d);
        score[j] = s * scale;
        mx = std::max(mx, score[j]);
      }
      double sum = 0.0;
      for (double& s : score) sum += (s = std::exp(s - mx));
      double* o = &ref[(size_t(i) * H + h) * kMlaVDim];
      for (int j = 0; j < keys; ++j)
        for (int d = 0; d < kMlaVDim; ++d)
          o[d] += score[j] / sum * f(kv, (size_t(j) * H + h) * 256 + kMlaNopeDim + d);
    }
  }
  // FP32 scores and accumulation, BF16 output rounding (2^-9 relative); the tensor-core kernel
  // also rounds the probabilities to BF16 before P V (another ~2^-9): 5e-3.
  EXPECT_LT(test::normalized_error(outs[0], ref), 5e-3) << "tensor cores";
  EXPECT_LT(test::normalized_error(outs[1], ref), 5e-3) << "CUDA cores";
}

INSTANTIATE_TEST_SUITE_P(Cases, MlaPrefillTest,
                         ::testing::Values(PrefillCase{100, 0, 100, 3},    // causal prefill
                                           PrefillCase{37, 200, 237, 2},   // chunked prefill
                                           PrefillCase{1, 0, 1, 4},        // one token
                                           PrefillCase{300, 5, 320, 2},    // keys past the limit
                                           PrefillCase{129, 0, 129, 2},    // ragged query tile
                                           PrefillCase{64, 1000, 1064, 1},  // long cache, one tile
                                           PrefillCase{513, 70, 600, 3}));  // tiles off the diagonal

}  // namespace
}  // namespace hymoe::gpu
