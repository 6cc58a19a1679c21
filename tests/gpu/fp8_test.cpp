// FP8 kernels against scalar references: the activation quantiser (bit-exact), the cuBLASLt GEMMs
// (BF16, per-tensor FP8, DeepSeek block-scaled FP8) and the FP8 GEMVs for 1..8 tokens (BF16 and
// FP8 activations).
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <vector>

#include <cmath>

#include "gpu_test_util.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/fp8_gemv.h"
#include "hymoe/gpu/fp8_quant.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/graph.h"

namespace hymoe::gpu {
namespace {

using test::make_rng;

struct QuantShape {
  int tokens, cols;
  int64_t x_stride, out_stride, scale_ld;
};
void PrintTo(const QuantShape& s, std::ostream* os) { *os << s.tokens << "x" << s.cols; }

// Scalar quantiser: the definition the kernel must reproduce bit for bit.
void reference_quant(const std::vector<Bf16>& x, const QuantShape& s, std::vector<uint8_t>& q,
                     std::vector<float>& scales) {
  const int blocks = (s.cols + 127) / 128;
  q.assign(s.tokens * s.out_stride, 0xFF);
  scales.assign(blocks * s.scale_ld, std::bit_cast<float>(0xFFFFFFFFu));
  for (int t = 0; t < s.tokens; ++t) {
    for (int b = 0; b < blocks; ++b) {
      float amax = 0.0f;
      for (int c = b * 128; c < std::min(s.cols, b * 128 + 128); ++c)
        amax = std::max(amax, std::fabs(x[t * s.x_stride + c].to_float()));
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      scales[b * s.scale_ld + t] = scale;
      for (int c = b * 128; c < std::min(s.cols, b * 128 + 128); ++c)
        q[t * s.out_stride + c] = float_to_fp8_e4m3(x[t * s.x_stride + c].to_float() / scale);
    }
  }
}

class QuantTest : public ::testing::TestWithParam<QuantShape> {};

TEST_P(QuantTest, BitExact) {
  HYMOE_REQUIRE_GPU();
  const QuantShape s = GetParam();
  auto rng = make_rng();
  Stream stream;
  auto x = test::random_bf16(s.tokens * s.x_stride, rng, 3.0f);
  if (s.tokens > 1)  // an all-zero block takes the scale-1 path
    for (int c = 0; c < std::min(128, s.cols); ++c) x[s.x_stride + c] = Bf16{0};
  const int blocks = (s.cols + 127) / 128;
  auto dx = test::to_device(x, stream);
  auto dq = test::poisoned<uint8_t>(s.tokens * s.out_stride, stream);
  auto ds = test::poisoned<float>(blocks * s.scale_ld, stream);
  quantize_fp8_per_token_block({dx.as<Bf16>(), dq.as<Fp8E4M3>(), ds.as<float>(), s.tokens, s.cols,
                                s.x_stride, s.out_stride, s.scale_ld},
                               stream);
  const auto q = test::to_host<uint8_t>(dq, s.tokens * s.out_stride, stream);
  const auto scales = test::to_host<uint32_t>(ds, blocks * s.scale_ld, stream);
  std::vector<uint8_t> rq;
  std::vector<float> rs;
  reference_quant(x, s, rq, rs);
  int bad_q = 0, bad_s = 0;
  for (size_t i = 0; i < q.size(); ++i) bad_q += q[i] != rq[i];
  for (size_t i = 0; i < scales.size(); ++i) bad_s += scales[i] != std::bit_cast<uint32_t>(rs[i]);
  EXPECT_EQ(bad_q, 0) << "codes differ (gaps must stay 0xFF)";
  EXPECT_EQ(bad_s, 0) << "scales differ (unused slots must stay poisoned)";
  // The PDL launch (a plain one below sm_90) on fresh poisoned outputs: bitwise the same.
  auto dq2 = test::poisoned<uint8_t>(s.tokens * s.out_stride, stream);
  auto ds2 = test::poisoned<float>(blocks * s.scale_ld, stream);
  Fp8QuantParams pdl{dx.as<Bf16>(), dq2.as<Fp8E4M3>(), ds2.as<float>(), s.tokens, s.cols,
                     s.x_stride, s.out_stride, s.scale_ld};
  pdl.pdl = true;
  quantize_fp8_per_token_block(pdl, stream);
  EXPECT_EQ(test::to_host<uint8_t>(dq2, s.tokens * s.out_stride, stream), q) << "pdl: codes differ";
  EXPECT_EQ(test::to_host<uint32_t>(ds2, blocks * s.scale_ld, stream), scales) << "pdl: scales differ";
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantTest,
                         ::testing::Values(QuantShape{1, 7168, 7168, 7168, 1},
                                           QuantShape{33, 1536, 1536, 1536, 40},
                                           QuantShape{5, 200, 203, 210, 5},     // ragged
                                           QuantShape{3, 512, 576, 528, 8}));  // strided

// ---- GEMMs: cuBLASLt and hymoe's block-scaled kernel -------------------------------------------

struct GemmCase {
  GemmKind kind;
  int m, n, k;
  GemmBackend backend = GemmBackend::kCublasLt;
};
void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << gemm_kind_name(c.kind) << " " << gemm_backend_name(c.backend) << " m" << c.m << " n"
      << c.n << " k" << c.k;
}

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  const GemmCase c = GetParam();
  auto rng = make_rng();
  Stream stream;
  CublasLt lt;
  GemmShape shape{c.m, c.n, c.k, c.k, c.k, c.n};
  const DeviceInfo info = query_device(0);
  if (c.backend == GemmBackend::kHymoe) {
    if (!fp8_block_gemm_supported()) GTEST_SKIP() << "no FP8 mma.sync on sm_" << info.sm();
  } else if (is_wgmma_backend(c.backend)) {
    if (!fp8_block_gemm_wgmma_supported())
      GTEST_SKIP() << "no wgmma kernel for sm_" << info.sm() << " in this build (sm_90a only)";
  } else if (!GemmPlan::supported(lt, c.kind, shape)) {
    // cuBLASLt's block scaling does not take every shape (GemmPlan's kAuto falls back): say so.
    GTEST_SKIP() << gemm_kind_name(c.kind) << " not supported by cuBLASLt on sm_" << info.sm()
                 << " for this shape";
  }
  GemmPlan plan(lt, c.kind, shape, c.backend);
  ASSERT_EQ(plan.backend(), c.backend);
  const int kb = (c.k + 127) / 128, nb = (c.n + 127) / 128;
  const int64_t wld = block_scale_ld(c.k);
  std::vector<double> a_val(size_t(c.m) * c.k), b_val(size_t(c.n) * c.k);
  DeviceBuffer da, db, dsa, dsb;
  if (c.kind == GemmKind::kBf16) {
    const auto a = test::random_bf16(a_val.size(), rng), b = test::random_bf16(b_val.size(), rng);
    for (size_t i = 0; i < a.size(); ++i) a_val[i] = a[i].to_float();
    for (size_t i = 0; i < b.size(); ++i) b_val[i] = b[i].to_float();
    da = test::to_device(a, stream);
    db = test::to_device(b, stream);
  } else {
    const auto a = test::random_fp8(a_val.size(), rng), b = test::random_fp8(b_val.size(), rng);
    std::vector<float> sa, sb;
    if (c.kind == GemmKind::kFp8TensorScale) {
      sa = test::random_f32(1, rng, 0.5f, 2.0f);
      sb = test::random_f32(1, rng, 0.5f, 2.0f);
    } else {
      sa = test::random_f32(size_t(kb) * c.m, rng, 0.001f, 0.01f);   // [kb][m]
      sb = test::random_f32(size_t(nb) * wld, rng, 0.0005f, 0.004f);  // [nb][wld]
    }
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.k; ++j)
        a_val[size_t(i) * c.k + j] = double{a[size_t(i) * c.k + j].to_float()} *
                                     (sa.size() == 1 ? sa[0] : sa[size_t(j / 128) * c.m + i]);
    for (int i = 0; i < c.n; ++i)
      for (int j = 0; j < c.k; ++j)
        b_val[size_t(i) * c.k + j] = double{b[size_t(i) * c.k + j].to_float()} *
                                     (sb.size() == 1 ? sb[0] : sb[size_t(i / 128) * wld + j / 128]);
    da = test::to_device(a, stream);
    db = test::to_device(b, stream);
    dsa = test::to_device(sa, stream);
    dsb = test::to_device(sb, stream);
  }
  auto dd = test::poisoned<Bf16>(size_t(c.m) * c.n, stream);
  plan.run({da.data(), dsa.as<float>(), db.data(), dsb.as<float>(), dd.as<Bf16>()}, stream);
  const auto d = test::to_float(test::to_host<Bf16>(dd, size_t(c.m) * c.n, stream));
  std::vector<double> ref(d.size());
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double acc = 0.0;
      for (int l = 0; l < c.k; ++l) acc += a_val[size_t(i) * c.k + l] * b_val[size_t(j) * c.k + l];
      ref[size_t(i) * c.n + j] = acc;
    }
  // FP32 accumulation, one BF16 rounding of the output (2^-9 relative RMS): 5e-3 is generous.
  EXPECT_LT(test::normalized_error(d, ref), 5e-3) << gemm_kind_name(c.kind);
  const GemmOperands ops{da.data(), dsa.as<float>(), db.data(), dsb.as<float>(), dd.as<Bf16>()};
  if (plan.backend() != GemmBackend::kCublasLt) {
    EXPECT_EQ(plan.algo_count(), 0);
    EXPECT_TRUE(plan.tune(ops, stream).empty());
    return;
  }
  // Every one of cuBLASLt's candidates (the heuristic's, their split-K variants and up to 48 in
  // all from widen()), each on a freshly poisoned output, to the same tolerance; then tune()
  // keeps the fastest.
  ASSERT_GE(plan.algo_count(), 1);
  EXPECT_EQ(plan.algo(), 0);
  const int heuristic = plan.algo_count();
  const int added = plan.widen(48);
  EXPECT_EQ(added, plan.algo_count() - heuristic);
  EXPECT_LE(plan.algo_count(), std::max(heuristic, 48));
  for (int i = 0; i < plan.algo_count(); ++i) {
    plan.use_algo(i);
    auto di = test::poisoned<Bf16>(size_t(c.m) * c.n, stream);
    plan.run({da.data(), dsa.as<float>(), db.data(), dsb.as<float>(), di.as<Bf16>()}, stream);
    const auto out = test::to_float(test::to_host<Bf16>(di, size_t(c.m) * c.n, stream));
    EXPECT_LT(test::normalized_error(out, ref), 5e-3)
        << gemm_kind_name(c.kind) << " candidate " << i << ": " << plan.algo_description(i);
  }
  EXPECT_THROW(plan.use_algo(plan.algo_count()), Error);
  EXPECT_THROW(plan.use_algo(-1), Error);
  const std::vector<double> ms = plan.tune(ops, stream, 2);
  ASSERT_EQ(ms.size(), static_cast<size_t>(plan.algo_count()));
  for (const double t : ms) EXPECT_GT(t, 0.0);  // (+infinity: a candidate refused at launch)
  EXPECT_EQ(std::min_element(ms.begin(), ms.end()) - ms.begin(), plan.algo());
  EXPECT_TRUE(std::isfinite(ms[static_cast<size_t>(plan.algo())]));
  auto dt = test::poisoned<Bf16>(size_t(c.m) * c.n, stream);
  plan.run({da.data(), dsa.as<float>(), db.data(), dsb.as<float>(), dt.as<Bf16>()}, stream);
  EXPECT_LT(test::normalized_error(test::to_float(test::to_host<Bf16>(dt, size_t(c.m) * c.n, stream)), ref),
            5e-3)
      << "tuned: " << plan.algo_description(plan.algo());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmTest,
    ::testing::Values(GemmCase{GemmKind::kBf16, 64, 320, 640},
                      GemmCase{GemmKind::kFp8TensorScale, 64, 320, 640},
                      GemmCase{GemmKind::kFp8BlockScale, 64, 256, 512},
                      GemmCase{GemmKind::kFp8BlockScale, 200, 320, 640},   // ragged n, padded ld
                      GemmCase{GemmKind::kFp8BlockScale, 128, 512, 7168},
                      GemmCase{GemmKind::kFp8BlockScale, 35, 320, 256},    // refused on sm_90
                      GemmCase{GemmKind::kFp8BlockScale, 64, 256, 512, GemmBackend::kHymoe},
                      GemmCase{GemmKind::kFp8BlockScale, 200, 320, 640, GemmBackend::kHymoe},
                      GemmCase{GemmKind::kFp8BlockScale, 128, 512, 7168, GemmBackend::kHymoe},
                      GemmCase{GemmKind::kFp8BlockScale, 35, 320, 256, GemmBackend::kHymoe},
                      GemmCase{GemmKind::kFp8BlockScale, 1, 576, 7168, GemmBackend::kHymoe},
                      GemmCase{GemmKind::kFp8BlockScale, 77, 130, 208, GemmBackend::kHymoe},  // k
                      GemmCase{GemmKind::kFp8BlockScale, 300, 1536, 2048, GemmBackend::kHymoe}));

// hymoe's wgmma kernel (sm_90a), both tile shapes (128 and 64 rows) and the warp-specialised
// persistent variants (kWgmmaWs, kWgmmaWsPipe, kWgmmaWs64, kWgmmaWsTma, and kWgmmaWsTmaC: round
// 5's cross-step schedule, here on 2 to 56 K blocks, odd and even), at the same shapes, plus 5
// row tiles over 32 K blocks (more K blocks than ring slots) and an odd n below one tile
// (unpaired stores); for kWgmmaWs* also more tiles than SMs (each block runs several, the ring
// carrying on across them). Filter: *Wgmma*.
std::vector<GemmCase> wgmma_cases() {
  const int shapes[][3] = {{64, 256, 512},    {200, 320, 640}, {128, 512, 7168},
                           {35, 320, 256},    {1, 576, 7168},  {77, 130, 208},  // k % 128 != 0
                           {300, 1536, 2048}, {513, 256, 4096}, {129, 41, 384}};  // odd ldd
  std::vector<GemmCase> cases;
  for (const GemmBackend backend : {GemmBackend::kWgmma, GemmBackend::kWgmma64, GemmBackend::kWgmmaWs,
                                    GemmBackend::kWgmmaWsPipe, GemmBackend::kWgmmaWs64,
                                    GemmBackend::kWgmmaWsTma, GemmBackend::kWgmmaWsTmaC})
    for (const auto& s : shapes) cases.push_back({GemmKind::kFp8BlockScale, s[0], s[1], s[2], backend});
  // 17 x 12 = 204 tiles: more than an H200's 132 SMs, so blocks run one or two tiles of 2 K
  // blocks each (the 6-slot ring holds 3 tiles' blocks at once); ragged m and n.
  for (const GemmBackend backend : {GemmBackend::kWgmmaWs, GemmBackend::kWgmmaWsPipe,
                                    GemmBackend::kWgmmaWs64, GemmBackend::kWgmmaWsTma,
                                    GemmBackend::kWgmmaWsTmaC})
    cases.push_back({GemmKind::kFp8BlockScale, 2100, 1500, 256, backend});
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Wgmma, GemmTest, ::testing::ValuesIn(wgmma_cases()));

TEST(GpuHost, GemmPlanFallsBackWhereCublasLtRefuses) {
  HYMOE_REQUIRE_GPU();
  CublasLt lt;
  const GemmShape shape{35, 320, 256, 256, 256, 320};
  GemmPlan plan(lt, GemmKind::kFp8BlockScale, shape);
  if (GemmPlan::supported(lt, GemmKind::kFp8BlockScale, shape)) {
    EXPECT_EQ(plan.backend(), GemmBackend::kCublasLt);
  } else if (fp8_block_gemm_wgmma_supported()) {
    // Hopper: the warp-specialised wgmma kernels, 64-row tiles for m 35, TMA loads with the
    // cross-step schedule above 64.
    EXPECT_EQ(plan.backend(), GemmBackend::kWgmmaWs64);
    EXPECT_EQ(GemmPlan(lt, GemmKind::kFp8BlockScale, {65, 320, 256, 256, 256, 320}).backend(),
              GemmBackend::kWgmmaWsTmaC);
    EXPECT_THROW(GemmPlan(lt, GemmKind::kFp8BlockScale, shape, GemmBackend::kCublasLt), Error);
  } else if (fp8_block_gemm_supported()) {
    EXPECT_EQ(plan.backend(), GemmBackend::kHymoe);
    EXPECT_THROW(GemmPlan(lt, GemmKind::kFp8BlockScale, shape, GemmBackend::kCublasLt), Error);
  }
  if (!fp8_block_gemm_wgmma_supported()) {
    EXPECT_THROW(GemmPlan(lt, GemmKind::kFp8BlockScale, shape, GemmBackend::kWgmma), Error);
  }
  EXPECT_THROW(GemmPlan(lt, GemmKind::kBf16, shape, GemmBackend::kHymoe), Error);
  EXPECT_THROW(GemmPlan(lt, GemmKind::kBf16, shape, GemmBackend::kWgmma), Error);
  EXPECT_THROW(GemmPlan(lt, GemmKind::kBf16, shape, GemmBackend::kWgmma64), Error);
}

// ---- FP8 GEMV --------------------------------------------------------------------------------

struct GemvCase {
  int tokens, n, k;
  bool subnormal_only = false;  // every weight an E4M3 subnormal (codes 1-7, 0x81-0x87)
};
void PrintTo(const GemvCase& c, std::ostream* os) {
  *os << c.tokens << " tokens n" << c.n << " k" << c.k << (c.subnormal_only ? " subnormal" : "");
}

class GemvTest : public ::testing::TestWithParam<GemvCase> {};

TEST_P(GemvTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  const GemvCase c = GetParam();
  auto rng = make_rng();
  Stream stream;
  const int kb = (c.k + 127) / 128, nb = (c.n + 127) / 128;
  auto w = test::random_fp8(size_t(c.n) * c.k, rng);
  // Subnormal weights: a kernel that flushes them (or decodes them as normals) is off by 100%.
  if (c.subnormal_only)
    for (auto& code : w) code = Fp8E4M3{static_cast<uint8_t>(1 + code.bits % 7 + (code.bits & 0x80))};
  const auto s = test::random_f32(size_t(nb) * kb, rng, 0.0005f, 0.004f);
  const auto x = test::random_bf16(size_t(c.tokens) * c.k, rng);
  auto dw = test::to_device(w, stream);
  auto ds = test::to_device(s, stream);
  auto dx = test::to_device(x, stream);
  std::vector<double> ref(size_t(c.tokens) * c.n);
  for (int t = 0; t < c.tokens; ++t)
    for (int i = 0; i < c.n; ++i) {
      double acc = 0.0;
      for (int j = 0; j < c.k; ++j)
        acc += double{w[size_t(i) * c.k + j].to_float()} * s[size_t(i / 128) * kb + j / 128] *
               x[size_t(t) * c.k + j].to_float();
      ref[size_t(t) * c.n + i] = acc;
    }
  // Every kernel, each on a freshly poisoned output; the streaming one bitwise the tensor-core
  // one's.
  std::vector<Bf16> tensor_out;
  for (const Fp8GemvImpl impl : {Fp8GemvImpl::kTensorCores, Fp8GemvImpl::kCudaCores, Fp8GemvImpl::kStream}) {
    const char* name = impl == Fp8GemvImpl::kTensorCores ? "tensor cores"
                       : impl == Fp8GemvImpl::kStream    ? "stream"
                                                         : "CUDA cores";
    if (impl != Fp8GemvImpl::kCudaCores && !fp8_block_gemm_supported()) {
      std::printf("%s: no FP8 mma.sync on this GPU, skipped\n", name);
      continue;
    }
    if (impl == Fp8GemvImpl::kStream && current_device_sm() < 90) {
      std::printf("%s: needs sm_90 or newer, skipped\n", name);
      continue;
    }
    auto dy = test::poisoned<Bf16>(size_t(c.tokens) * c.n, stream);
    Fp8GemvParams p{dw.as<Fp8E4M3>(), ds.as<float>(), dx.as<Bf16>(), dy.as<Bf16>(), c.tokens, c.n,
                    c.k, c.k, kb, c.k, c.n};
    p.impl = impl;
    fp8_gemv(p, stream);
    const auto y_bf16 = test::to_host<Bf16>(dy, size_t(c.tokens) * c.n, stream);
    const auto y = test::to_float(y_bf16);
    EXPECT_LT(test::normalized_error(y, ref), 5e-3) << name;
    if (impl == Fp8GemvImpl::kTensorCores) tensor_out = y_bf16;
    if (impl == Fp8GemvImpl::kStream) {
      int differ = 0;
      for (size_t i = 0; i < y_bf16.size(); ++i) differ += y_bf16[i].bits != tensor_out[i].bits;
      EXPECT_EQ(differ, 0) << "stream: outputs differ from the tensor-core kernel's";
    }
    // The opt-in launch variants, each on a freshly poisoned output: bitwise the plain launch's.
    // {pdl, pdl_prefetch_l2, stream_blocks_per_sm} (the last one: another grid of the stream kernel
    // than its default 2 blocks an SM).
    const int variants[][3] = {{1, 0, 2}, {1, 1, 2}, {0, 0, 1}, {1, 0, 1}};
    for (const auto& v : variants) {
      if (v[2] != 2 && impl != Fp8GemvImpl::kStream) continue;
      auto dy_var = test::poisoned<Bf16>(size_t(c.tokens) * c.n, stream);
      p.y = dy_var.as<Bf16>();
      p.pdl = v[0] != 0;
      p.pdl_prefetch_l2 = v[1] != 0;
      p.stream_blocks_per_sm = v[2];
      fp8_gemv(p, stream);
      const auto y_var = test::to_host<Bf16>(dy_var, size_t(c.tokens) * c.n, stream);
      int differ = 0;
      for (size_t i = 0; i < y_var.size(); ++i) differ += y_var[i].bits != y_bf16[i].bits;
      EXPECT_EQ(differ, 0) << name << " pdl=" << v[0] << " pdl_prefetch_l2=" << v[1]
                           << " stream_blocks_per_sm=" << v[2] << ": outputs differ from the plain launch";
    }
    p.stream_blocks_per_sm = 2;
    // FP32 output: the same sums unrounded (within BF16's half ulp of the BF16 results).
    auto dyf = test::poisoned<float>(size_t(c.tokens) * c.n, stream);
    p.y = nullptr;
    p.y_f32 = dyf.as<float>();
    fp8_gemv(p, stream);
    const auto yf = test::to_host<float>(dyf, size_t(c.tokens) * c.n, stream);
    int off = 0;
    for (size_t i = 0; i < yf.size(); ++i) off += !(std::fabs(yf[i] - y[i]) <= std::fabs(y[i]) * (1.0f / 256));
    EXPECT_EQ(off, 0) << name << ": FP32 output away from the BF16 one";
    EXPECT_LT(test::normalized_error(yf, ref), 5e-3) << name << " FP32 output";
    p.y_f32 = nullptr;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvTest,
                         ::testing::Values(GemvCase{1, 1000, 1536}, GemvCase{3, 129, 7168},
                                           GemvCase{8, 300, 2048}, GemvCase{5, 7, 16},
                                           GemvCase{2, 2048, 512}, GemvCase{4, 576, 7168},
                                           GemvCase{1, 300, 16384}, GemvCase{7, 131, 4096},
                                           GemvCase{1, 256, 2048, true},
                                           GemvCase{8, 130, 1024, true},
                                           // The stream kernel's blocks looping over several
                                           // tiles (750 and 375 tiles, more than the H200's
                                           // 132 SMs), the ring wrapping across tiles.
                                           GemvCase{1, 12000, 512}, GemvCase{8, 6000, 256},
                                           GemvCase{2, 4000, 3072}));

// A chain of dependent GEMVs launched with PDL equals the same chain launched plainly, bit for
// bit. Built so that a missing or misplaced griddepcontrol.wait shows: a long producer (2048 x
// 16384, 32 MB of weights, hundreds of blocks) writes the activations of short consumers that
// launch while it runs; a consumer writes a buffer that the step before it read (write after
// read) and the second producer overwrites a buffer the step before it read. The activation
// buffers are NaN-poisoned before every run, so a consumer that reads early reads NaN (or a stale
// value from the step before). Repeated to give a race many chances, from the stream and then
// replayed from a captured CUDA graph. first_pdl = false: the first producer is a plain launch
// and the PDL consumer after it must still wait for it. The q8 cases run fp8_gemv_q8 on BF16 x:
// each step's quantiser launch overwrites the quantised copy of x a step before it may have read.
struct GemvChainCase {
  Fp8GemvImpl impl;
  int tokens;
  bool first_pdl;
  bool prefetch = false;  // Fp8GemvParams::pdl_prefetch_l2 (not with q8)
  // fp8_gemv_q8 on BF16 x instead (impl unused): each step's quantiser launch and GEMV, both PDL.
  bool q8 = false;
  int q8_warps = 0;  // Fp8GemvQ8Params::warps_per_tile
  bool q8_ring = false;  // Fp8GemvQ8Loads::kRing
};
void PrintTo(const GemvChainCase& c, std::ostream* os) {
  *os << (c.q8                                  ? "q8"
          : c.impl == Fp8GemvImpl::kTensorCores ? "tensor cores"
          : c.impl == Fp8GemvImpl::kStream      ? "stream"
                                                : "CUDA cores")
      << " " << c.tokens << " tokens" << (c.first_pdl ? "" : ", plain first launch")
      << (c.prefetch ? ", L2 prefetch" : "");
  if (c.q8_warps) *os << ", " << c.q8_warps << " warps a tile";
  if (c.q8_ring) *os << ", cp.async ring";
}

class GemvPdlChainTest : public ::testing::TestWithParam<GemvChainCase> {};

TEST_P(GemvPdlChainTest, EqualsSequential) {
  HYMOE_REQUIRE_GPU();
  const GemvChainCase c = GetParam();
  if ((c.q8 || c.impl != Fp8GemvImpl::kCudaCores) && !fp8_block_gemm_supported())
    GTEST_SKIP() << "no FP8 mma.sync on this GPU";
  if (!c.q8 && c.impl == Fp8GemvImpl::kStream && query_device(0).sm() < 90)
    GTEST_SKIP() << "the streaming kernel needs sm_90 or newer";
  if (query_device(0).sm() < 90)
    std::printf("sm_%d has no PDL: the flag is a no-op, checked anyway\n", query_device(0).sm());
  auto rng = make_rng();
  Stream stream;
  struct Step {
    int n, k, x, y;  // x, y: indices into act
  };
  // act[0]: the fixed input (16384 wide); act[1..4]: produced and consumed along the chain. The
  // last step reads what was written three steps before it (dependence through the chain).
  const Step steps[] = {{2048, 16384, 0, 1}, {256, 2048, 1, 2},   {2048, 256, 2, 1},
                        {512, 2048, 1, 3},   {2048, 16384, 0, 1}, {256, 2048, 1, 2},
                        {256, 512, 3, 4}};
  constexpr int kBuffers = 5;
  const int widths[kBuffers] = {16384, 2048, 256, 512, 256};
  const int t = c.tokens;
  std::vector<DeviceBuffer> act;
  act.push_back(test::to_device(test::random_bf16(size_t(t) * widths[0], rng), stream));
  for (int b = 1; b < kBuffers; ++b) act.emplace_back(size_t(t) * widths[b] * sizeof(Bf16));
  std::vector<DeviceBuffer> w, sc;
  for (const Step& st : steps) {
    w.push_back(test::to_device(test::random_fp8(size_t(st.n) * st.k, rng), stream));
    const size_t scales = size_t((st.n + 127) / 128) * ((st.k + 127) / 128);
    sc.push_back(test::to_device(test::random_f32(scales, rng, 0.0005f, 0.001f), stream));
  }
  // q8: each buffer's quantised copy and its scales (the quantiser's output, the GEMV's input).
  std::vector<DeviceBuffer> xq, xs;
  for (int b = 0; b < kBuffers; ++b) {
    xq.emplace_back(size_t(t) * widths[b]);
    xs.emplace_back(size_t((widths[b] + 127) / 128) * t * sizeof(float));
  }
  auto poison = [&] {
    for (int b = 1; b < kBuffers; ++b) act[b].fill_bytes(0xFF, stream);
    for (int b = 0; b < kBuffers; ++b) {
      xq[b].fill_bytes(0xFF, stream);
      xs[b].fill_bytes(0xFF, stream);
    }
  };
  auto enqueue_chain = [&](bool pdl) {  // the GEMV launches only (the graph holds kernels only)
    for (size_t i = 0; i < std::size(steps); ++i) {
      const Step& st = steps[i];
      if (c.q8) {
        Fp8GemvQ8Params q;
        q.w = w[i].as<Fp8E4M3>();
        q.w_scales = sc[i].as<float>();
        q.x = xq[st.x].as<Fp8E4M3>();
        q.x_scales = xs[st.x].as<float>();
        q.y = act[st.y].as<Bf16>();
        q.tokens = t;
        q.n = st.n;
        q.k = st.k;
        q.ldw = st.k;
        q.scale_ld = (st.k + 127) / 128;
        q.ldx = widths[st.x];
        q.x_scale_ld = t;
        q.ldy = widths[st.y];
        q.x_bf16 = act[st.x].as<Bf16>();
        q.ldx_bf16 = widths[st.x];
        q.pdl = pdl && (i > 0 || c.first_pdl);
        q.warps_per_tile = c.q8_warps;
        if (c.q8_ring) q.loads = Fp8GemvQ8Loads::kRing;
        fp8_gemv_q8(q, stream);
        continue;
      }
      Fp8GemvParams p{w[i].as<Fp8E4M3>(), sc[i].as<float>(), act[st.x].as<Bf16>(),
                      act[st.y].as<Bf16>(), t, st.n, st.k, st.k, (st.k + 127) / 128,
                      widths[st.x], widths[st.y]};
      p.impl = c.impl;
      p.pdl = pdl && (i > 0 || c.first_pdl);
      p.pdl_prefetch_l2 = c.prefetch;
      fp8_gemv(p, stream);
    }
  };
  auto read_back = [&] {
    std::vector<std::vector<Bf16>> out;
    for (int b = 1; b < kBuffers; ++b)
      out.push_back(test::to_host<Bf16>(act[b], size_t(t) * widths[b], stream));
    return out;
  };
  poison();
  enqueue_chain(false);
  const auto expect = read_back();
  for (int b = 0; b < kBuffers - 1; ++b) {
    int bad = 0;
    for (const Bf16 v : expect[b]) bad += !std::isfinite(v.to_float());
    ASSERT_EQ(bad, 0) << "plain chain left a poisoned or infinite value in buffer " << b + 1;
  }
  auto check = [&](const char* how, int rep) {
    const auto got = read_back();
    for (int b = 0; b < kBuffers - 1; ++b) {
      int differ = 0;
      for (size_t i = 0; i < got[b].size(); ++i) differ += got[b][i].bits != expect[b][i].bits;
      ASSERT_EQ(differ, 0) << "buffer " << b + 1 << " differs from the plain chain (" << how
                           << ", run " << rep << ")";
    }
  };
  for (int rep = 0; rep < 20; ++rep) {
    poison();
    enqueue_chain(true);
    check("PDL launches", rep);
    if (HasFatalFailure()) return;
  }
  // The same PDL chain captured as a CUDA graph (programmatic edges) and replayed.
  const CapturedGraph graph(stream, [&] { enqueue_chain(true); });
  for (int rep = 0; rep < 10; ++rep) {
    poison();
    graph.launch(stream);
    check("PDL chain replayed from a CUDA graph", rep);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Chains, GemvPdlChainTest,
                         ::testing::Values(GemvChainCase{Fp8GemvImpl::kCudaCores, 1, true},
                                           GemvChainCase{Fp8GemvImpl::kCudaCores, 3, true},
                                           GemvChainCase{Fp8GemvImpl::kCudaCores, 1, false},
                                           GemvChainCase{Fp8GemvImpl::kTensorCores, 1, true},
                                           GemvChainCase{Fp8GemvImpl::kTensorCores, 8, true},
                                           GemvChainCase{Fp8GemvImpl::kTensorCores, 2, false},
                                           GemvChainCase{Fp8GemvImpl::kCudaCores, 1, true, true},
                                           GemvChainCase{Fp8GemvImpl::kTensorCores, 1, true, true},
                                           GemvChainCase{Fp8GemvImpl::kStream, 1, true},
                                           GemvChainCase{Fp8GemvImpl::kStream, 8, true},
                                           GemvChainCase{Fp8GemvImpl::kStream, 3, false},
                                           GemvChainCase{Fp8GemvImpl::kAuto, 1, true, false, true},
                                           GemvChainCase{Fp8GemvImpl::kAuto, 8, true, false, true},
                                           GemvChainCase{Fp8GemvImpl::kAuto, 2, false, false, true, 4},
                                           GemvChainCase{Fp8GemvImpl::kAuto, 3, true, false, true, 16},
                                           GemvChainCase{Fp8GemvImpl::kAuto, 1, true, false, true, 0, true},
                                           GemvChainCase{Fp8GemvImpl::kAuto, 8, false, false, true, 4, true},
                                           GemvChainCase{Fp8GemvImpl::kAuto, 2, true, false, true, 16, true}));

// fp8_gemv_fused: parts over one x in one launch, each part bitwise its own tensor-core launch
// (itself checked against the FP64 reference above), on NaN-poisoned outputs with a row stride
// beyond n; plain and PDL, and 1..4 parts (DeepSeek-V3's q_a + kv_a and gate + up among them).
struct GemvFusedCase {
  int tokens, k;
  std::vector<int> n;
};
void PrintTo(const GemvFusedCase& c, std::ostream* os) {
  *os << c.tokens << " tokens k" << c.k << " parts";
  for (const int n : c.n) *os << " " << n;
}

class GemvFusedTest : public ::testing::TestWithParam<GemvFusedCase> {};

TEST_P(GemvFusedTest, EqualsSeparateLaunches) {
  HYMOE_REQUIRE_GPU();
  if (!fp8_block_gemm_supported() || current_device_sm() < 90)
    GTEST_SKIP() << "fp8_gemv_fused needs sm_90 or newer";
  const GemvFusedCase c = GetParam();
  auto rng = make_rng();
  Stream stream;
  const int parts = static_cast<int>(c.n.size()), kb = (c.k + 127) / 128;
  auto dx = test::to_device(test::random_bf16(size_t(c.tokens) * c.k, rng), stream);
  std::vector<DeviceBuffer> w, sc;
  std::vector<Fp8GemvParams> p(parts);
  for (int i = 0; i < parts; ++i) {
    w.push_back(test::to_device(test::random_fp8(size_t(c.n[i]) * c.k, rng), stream));
    const size_t scales = size_t((c.n[i] + 127) / 128) * kb;
    sc.push_back(test::to_device(test::random_f32(scales, rng, 0.0005f, 0.004f), stream));
    p[i] = Fp8GemvParams{w[i].as<Fp8E4M3>(), sc[i].as<float>(), dx.as<Bf16>(), nullptr, c.tokens,
                         c.n[i], c.k, c.k, kb, c.k, c.n[i] + 3};
    p[i].impl = Fp8GemvImpl::kTensorCores;
  }
  std::vector<std::vector<Bf16>> expect;
  for (int i = 0; i < parts; ++i) {
    auto dy = test::poisoned<Bf16>(size_t(c.tokens) * p[i].ldy, stream);
    Fp8GemvParams q = p[i];
    q.y = dy.as<Bf16>();
    fp8_gemv(q, stream);
    expect.push_back(test::to_host<Bf16>(dy, size_t(c.tokens) * p[i].ldy, stream));
  }
  for (const bool pdl : {false, true}) {
    std::vector<DeviceBuffer> dy;
    for (int i = 0; i < parts; ++i) {
      dy.push_back(test::poisoned<Bf16>(size_t(c.tokens) * p[i].ldy, stream));
      p[i].y = dy[i].as<Bf16>();
      p[i].pdl = pdl;
    }
    fp8_gemv_fused(p.data(), parts, stream);
    for (int i = 0; i < parts; ++i) {
      const auto got = test::to_host<Bf16>(dy[i], size_t(c.tokens) * p[i].ldy, stream);
      int differ = 0, finite = 0;
      for (int t = 0; t < c.tokens; ++t)
        for (int r = 0; r < c.n[i]; ++r) {
          const size_t at = size_t(t) * p[i].ldy + r;
          differ += got[at].bits != expect[i][at].bits;
          finite += std::isfinite(got[at].to_float());
        }
      EXPECT_EQ(finite, c.tokens * c.n[i]) << "part " << i << " pdl=" << pdl << ": unwritten outputs";
      EXPECT_EQ(differ, 0) << "part " << i << " pdl=" << pdl << ": differs from its own launch";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Parts, GemvFusedTest,
                         ::testing::Values(GemvFusedCase{1, 7168, {1536, 576}},
                                           GemvFusedCase{8, 7168, {1536, 576}},
                                           GemvFusedCase{2, 7168, {2048, 2048}},
                                           GemvFusedCase{5, 2048, {7, 300, 16, 129}},
                                           GemvFusedCase{1, 1040, {33}},
                                           // 769 tiles: blocks loop across parts.
                                           GemvFusedCase{3, 512, {8192, 4000, 100}}));

// ---- FP8 GEMV with FP8 activations ----------------------------------------------------------
// fp8_gemv_q8 against an FP64 reference over the very codes and scales the GPU quantiser wrote
// (the kernel's definition: sum over 128-blocks of w_scale x x_scale x (W . xq)), per element
// within BF16 rounding plus the FP32 sums' error; every part of a fused launch, the PDL launch and
// every block shape bitwise the plain single launch, on NaN-poisoned outputs with a row stride
// beyond n.
struct GemvQ8Case {
  int tokens, k;
  std::vector<int> n;  // parts
  int64_t x_scale_ld;  // >= tokens
};
void PrintTo(const GemvQ8Case& c, std::ostream* os) {
  *os << c.tokens << " tokens k" << c.k << " x_scale_ld " << c.x_scale_ld << " parts";
  for (const int n : c.n) *os << " " << n;
}

class GemvQ8Test : public ::testing::TestWithParam<GemvQ8Case> {};

TEST_P(GemvQ8Test, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  if (!fp8_gemv_q8_supported()) GTEST_SKIP() << "no FP8 mma.sync on this GPU";
  const GemvQ8Case c = GetParam();
  auto rng = make_rng();
  Stream stream;
  const int parts = static_cast<int>(c.n.size()), kb = (c.k + 127) / 128;
  const int64_t ldx = (c.k + 16 + 15) / 16 * 16;  // a row stride beyond k
  const auto x = test::random_bf16(size_t(c.tokens) * c.k, rng, 3.0f);
  auto dx = test::to_device(x, stream);
  auto dxq = test::poisoned<uint8_t>(size_t(c.tokens) * ldx, stream);
  auto dxs = test::poisoned<float>(size_t(kb) * c.x_scale_ld, stream);
  quantize_fp8_per_token_block({dx.as<Bf16>(), dxq.as<Fp8E4M3>(), dxs.as<float>(), c.tokens, c.k, c.k,
                                ldx, c.x_scale_ld},
                               stream);
  const auto xq = test::to_host<uint8_t>(dxq, size_t(c.tokens) * ldx, stream);
  const auto xs = test::to_host<float>(dxs, size_t(kb) * c.x_scale_ld, stream);
  std::vector<DeviceBuffer> w, sc;
  std::vector<std::vector<Fp8E4M3>> hw;
  std::vector<std::vector<float>> hs;
  std::vector<Fp8GemvQ8Params> p(parts);
  for (int i = 0; i < parts; ++i) {
    hw.push_back(test::random_fp8(size_t(c.n[i]) * c.k, rng));
    hs.push_back(test::random_f32(size_t((c.n[i] + 127) / 128) * kb, rng, 0.0005f, 0.004f));
    w.push_back(test::to_device(hw[i], stream));
    sc.push_back(test::to_device(hs[i], stream));
    p[i].w = w[i].as<Fp8E4M3>();
    p[i].w_scales = sc[i].as<float>();
    p[i].x = dxq.as<Fp8E4M3>();
    p[i].x_scales = dxs.as<float>();
    p[i].tokens = c.tokens;
    p[i].n = c.n[i];
    p[i].k = c.k;
    p[i].ldw = c.k;
    p[i].scale_ld = kb;
    p[i].ldx = ldx;
    p[i].x_scale_ld = c.x_scale_ld;
    p[i].ldy = c.n[i] + 3;
  }
  std::vector<std::vector<Bf16>> single(parts);
  for (int i = 0; i < parts; ++i) {
    auto dy = test::poisoned<Bf16>(size_t(c.tokens) * p[i].ldy, stream);
    Fp8GemvQ8Params q = p[i];
    q.y = dy.as<Bf16>();
    fp8_gemv_q8(q, stream);
    single[i] = test::to_host<Bf16>(dy, size_t(c.tokens) * p[i].ldy, stream);
    int bad = 0, unwritten = 0;
    for (int t = 0; t < c.tokens; ++t)
      for (int r = 0; r < c.n[i]; ++r) {
        double sum = 0.0, mag = 0.0;
        for (int b = 0; b < kb; ++b) {
          double blk = 0.0, blk_mag = 0.0;
          for (int j = b * 128; j < std::min(c.k, b * 128 + 128); ++j) {
            const double prod = double{hw[i][size_t(r) * c.k + j].to_float()} *
                                Fp8E4M3{xq[size_t(t) * ldx + j]}.to_float();
            blk += prod;
            blk_mag += std::fabs(prod);
          }
          const double scale = double{hs[i][size_t(r / 128) * kb + b]} * xs[size_t(b) * c.x_scale_ld + t];
          sum += blk * scale;
          mag += blk_mag * std::fabs(scale);
        }
        const float got = single[i][size_t(t) * p[i].ldy + r].to_float();
        if (!std::isfinite(got)) {
          ++unwritten;
          continue;
        }
        // BF16 output rounding (half an ulp: 2^-8 relative) and the sums' rounding, bounded by
        // 2^-13 of the |terms|: the tensor cores' FP8 accumulation keeps about 14 bits (DeepSeek-V3
        // report, H800), the FP32 register sums far more.
        bad += std::fabs(got - sum) > std::ldexp(std::fabs(sum), -8) + std::ldexp(mag, -13);
      }
    EXPECT_EQ(unwritten, 0) << "part " << i << ": outputs left unwritten";
    EXPECT_EQ(bad, 0) << "part " << i << ": outputs off the reference";
  }
  // Outputs of part i (its n rows of each token) that differ from its single launch's.
  auto differ_from_single = [&](const std::vector<DeviceBuffer>& dy, int i) {
    const auto got = test::to_host<Bf16>(dy[i], size_t(c.tokens) * p[i].ldy, stream);
    int differ = 0;
    for (int t = 0; t < c.tokens; ++t)
      for (int r = 0; r < c.n[i]; ++r) {
        const size_t at = size_t(t) * p[i].ldy + r;
        differ += got[at].bits != single[i][at].bits;
      }
    return differ;
  };
  // Plain and PDL, each block shape (warps a tile; 0: the launcher's choice), each staging, both
  // ways of loading the weights (registers in rounds, the per-warp cp.async ring).
  using S = Fp8GemvQ8Staging;
  using L = Fp8GemvQ8Loads;
  struct Variant {
    bool pdl;
    int warps;
    S staging;
    L loads = L::kAuto;
  };
  for (const Variant v :
       {Variant{false, 0, S::kAuto}, Variant{true, 0, S::kAuto}, Variant{false, 4, S::kAuto},
        Variant{true, 8, S::kAuto}, Variant{false, 16, S::kAuto}, Variant{false, 0, S::kNone},
        Variant{true, 4, S::kNone}, Variant{false, 16, S::kScalesAndX}, Variant{true, 8, S::kScales},
        Variant{false, 4, S::kScalesAndX}, Variant{false, 0, S::kAuto, L::kRing}, Variant{true, 0, S::kAuto, L::kRing},
        Variant{false, 4, S::kNone, L::kRing}, Variant{true, 4, S::kScalesAndX, L::kRing},
        Variant{false, 8, S::kScales, L::kRing}, Variant{true, 8, S::kNone, L::kRing},
        Variant{false, 16, S::kScalesAndX, L::kRing}, Variant{true, 16, S::kAuto, L::kRing},
        Variant{false, 0, S::kAuto, L::kRounds}}) {
    const bool pdl = v.pdl;
    const int warps = v.warps;
    std::vector<DeviceBuffer> dy;
    for (int i = 0; i < parts; ++i) {
      dy.push_back(test::poisoned<Bf16>(size_t(c.tokens) * p[i].ldy, stream));
      p[i].y = dy[i].as<Bf16>();
      p[i].pdl = pdl;
      p[i].warps_per_tile = warps;
      p[i].staging = v.staging;
      p[i].loads = v.loads;
    }
    fp8_gemv_q8_fused(p.data(), parts, stream);
    for (int i = 0; i < parts; ++i)
      EXPECT_EQ(differ_from_single(dy, i), 0) << "part " << i << " pdl=" << pdl << " warps_per_tile=" << warps
                                              << " staging=" << static_cast<int>(v.staging)
                                              << " loads=" << static_cast<int>(v.loads)
                                              << ": differs from its own launch";
  }
  for (int i = 0; i < parts; ++i) p[i].loads = L::kAuto;
  // BF16 activations, quantised by the call (a quantiser launch into the NaN-poisoned scratch x /
  // x_scales): bitwise the quantiser + GEMV above, on a strided x.
  const int64_t ldx_bf16 = c.k + 8;
  std::vector<Bf16> xs_strided(size_t(c.tokens) * ldx_bf16, Bf16{0x7fc0});
  for (int t = 0; t < c.tokens; ++t)
    for (int j = 0; j < c.k; ++j) xs_strided[size_t(t) * ldx_bf16 + j] = x[size_t(t) * c.k + j];
  auto dx_bf16 = test::to_device(xs_strided, stream);
  for (const Variant v : {Variant{false, 0, S::kAuto}, Variant{true, 0, S::kAuto}, Variant{true, 16, S::kAuto},
                          Variant{false, 4, S::kScalesAndX}, Variant{true, 8, S::kNone},
                          Variant{false, 0, S::kScales}}) {
    auto scratch_q = test::poisoned<uint8_t>(size_t(c.tokens) * ldx, stream);
    auto scratch_s = test::poisoned<float>(size_t(kb) * c.x_scale_ld, stream);
    std::vector<DeviceBuffer> dy;
    for (int i = 0; i < parts; ++i) {
      dy.push_back(test::poisoned<Bf16>(size_t(c.tokens) * p[i].ldy, stream));
      p[i].y = dy[i].as<Bf16>();
      p[i].pdl = v.pdl;
      p[i].warps_per_tile = v.warps;
      p[i].staging = v.staging;
      p[i].x = scratch_q.as<Fp8E4M3>();
      p[i].x_scales = scratch_s.as<float>();
      p[i].x_bf16 = dx_bf16.as<Bf16>();
      p[i].ldx_bf16 = ldx_bf16;
    }
    fp8_gemv_q8_fused(p.data(), parts, stream);
    for (int i = 0; i < parts; ++i)
      EXPECT_EQ(differ_from_single(dy, i), 0) << "BF16 x, part " << i << " pdl=" << v.pdl
                                              << " warps_per_tile=" << v.warps
                                              << " staging=" << static_cast<int>(v.staging)
                                              << ": differs from quantiser + GEMV";
  }
}

INSTANTIATE_TEST_SUITE_P(Parts, GemvQ8Test,
                         ::testing::Values(GemvQ8Case{1, 7168, {1536, 576}, 1},
                                           GemvQ8Case{8, 7168, {2048}, 8},
                                           GemvQ8Case{2, 2048, {7168}, 3},
                                           GemvQ8Case{1, 16384, {300}, 1},
                                           GemvQ8Case{5, 1040, {7, 300, 16, 129}, 9},  // k % 128 = 16
                                           GemvQ8Case{3, 16, {33}, 3},
                                           GemvQ8Case{7, 1536, {4000}, 7},
                                           // 8-warp blocks (more tiles than two an SM) over parts.
                                           GemvQ8Case{4, 512, {8192, 1000}, 4}));

TEST(GpuHost, GemvQ8RejectsBadShapes) {
  alignas(16) static const uint8_t bytes[64] = {};
  Fp8GemvQ8Params a;
  a.w = reinterpret_cast<const Fp8E4M3*>(bytes);
  a.w_scales = reinterpret_cast<const float*>(bytes);
  a.x = reinterpret_cast<const Fp8E4M3*>(bytes);
  a.x_scales = reinterpret_cast<const float*>(bytes);
  a.y = reinterpret_cast<Bf16*>(const_cast<uint8_t*>(bytes));
  a.tokens = 1;
  a.n = a.k = 16;
  a.ldw = a.ldx = a.ldy = 16;
  a.scale_ld = a.x_scale_ld = 1;
  Fp8GemvQ8Params b = a;
  b.tokens = 9;
  EXPECT_THROW(fp8_gemv_q8(b, nullptr), Error);
  b = a;
  b.ldx = 24;  // not a multiple of 16
  EXPECT_THROW(fp8_gemv_q8(b, nullptr), Error);
  b = a;
  b.tokens = 2;  // x_scale_ld below tokens
  b.ldy = 16;
  EXPECT_THROW(fp8_gemv_q8(b, nullptr), Error);
  b = a;
  b.x_scales = nullptr;
  EXPECT_THROW(fp8_gemv_q8(b, nullptr), Error);
  b = a;
  b.warps_per_tile = 6;
  EXPECT_THROW(fp8_gemv_q8(b, nullptr), Error);
  Fp8GemvQ8Params parts[kGemvMaxFused + 1] = {a, a, a, a, a};
  EXPECT_THROW(fp8_gemv_q8_fused(parts, 0, nullptr), Error);
  EXPECT_THROW(fp8_gemv_q8_fused(parts, kGemvMaxFused + 1, nullptr), Error);
  parts[1].x_scales = reinterpret_cast<const float*>(bytes + 16);  // not the shared x's scales
  EXPECT_THROW(fp8_gemv_q8_fused(parts, 2, nullptr), Error);
  b = a;
  b.x_bf16 = reinterpret_cast<const Bf16*>(bytes);
  b.ldx_bf16 = 12;  // not a multiple of 8
  EXPECT_THROW(fp8_gemv_q8(b, nullptr), Error);
  b.ldx_bf16 = 16;
  b.x = nullptr;  // no scratch for the quantised activations
  EXPECT_THROW(fp8_gemv_q8(b, nullptr), Error);
}

TEST(GpuHost, GemvRejectsBadShapes) {
  Fp8GemvParams p;
  p.tokens = 9;
  EXPECT_THROW(fp8_gemv(p, nullptr), Error);
  p.tokens = 1;
  p.n = 10;
  p.k = 100;  // not a multiple of 16
  EXPECT_THROW(fp8_gemv(p, nullptr), Error);
  EXPECT_THROW(fp8_gemv_fused(&p, 1, nullptr), Error);
  // Fused parts must share x, tokens and k; 1..kGemvMaxFused of them.
  alignas(16) static const uint8_t bytes[64] = {};
  Fp8GemvParams a{reinterpret_cast<const Fp8E4M3*>(bytes), reinterpret_cast<const float*>(bytes),
                  reinterpret_cast<const Bf16*>(bytes), reinterpret_cast<Bf16*>(const_cast<uint8_t*>(bytes)),
                  1, 16, 16, 16, 1, 16, 16};
  Fp8GemvParams parts[kGemvMaxFused + 1] = {a, a, a, a, a};
  EXPECT_THROW(fp8_gemv_fused(parts, 0, nullptr), Error);
  EXPECT_THROW(fp8_gemv_fused(parts, kGemvMaxFused + 1, nullptr), Error);
  parts[1].k = 32;
  parts[1].ldw = parts[1].ldx = 32;
  EXPECT_THROW(fp8_gemv_fused(parts, 2, nullptr), Error);
  parts[1] = a;
  parts[1].tokens = 2;
  EXPECT_THROW(fp8_gemv_fused(parts, 2, nullptr), Error);
}

}  // namespace
}  // namespace hymoe::gpu
