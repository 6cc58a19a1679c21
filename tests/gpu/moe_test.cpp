// MoE dispatch end to end against a float64 reference: quantise -> expert offsets -> permute ->
// grouped block-scaled FP8 GEMM -> weighted un-permute, with empty experts and ragged sizes;
// and the grouped scale layout of the quantiser.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <span>

#include "gpu_test_util.h"
#include "hymoe/gpu/fp8_quant.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/moe.h"

namespace hymoe::gpu {
namespace {

constexpr int kPipeK = 256, kPipeN = 320;  // n ragged (3 scale rows)

// The pipeline on `tokens` tokens (top 4 of the first 11 of 16 experts, so experts 11..15 get no
// tokens but one 1-row expert) through each of `backends` of the grouped GEMM; or, with
// `counts`, top 1 routing with exactly counts[e] tokens for expert e (tokens: their sum).
// k: the GEMM's depth (a multiple of 128: the reference reads whole scale blocks); n its width.
void check_pipeline(int tokens, std::initializer_list<GemmBackend> backends,
                    std::span<const int> counts = {}, int k = kPipeK, int n = kPipeN) {
  auto rng = test::make_rng();
  Stream stream;
  CublasLt lt;
  const bool exact = !counts.empty();
  const int top_k = exact ? 1 : 4, experts = exact ? static_cast<int>(counts.size()) : 16;
  const int used = 11;
  if (exact) tokens = std::accumulate(counts.begin(), counts.end(), 0);
  // Routing: top_k distinct experts per token among the first `used`, with random weights.
  std::vector<int32_t> ids(tokens * top_k);
  if (exact) {  // counts[e] tokens for expert e, in shuffled token order
    size_t i = 0;
    for (int e = 0; e < experts; ++e)
      for (int c = 0; c < counts[e]; ++c) ids[i++] = e;
    std::shuffle(ids.begin(), ids.end(), rng);
  } else {
    std::vector<int> pool(used);
    std::iota(pool.begin(), pool.end(), 0);
    for (int t = 0; t < tokens; ++t) {
      std::shuffle(pool.begin(), pool.end(), rng);
      std::copy(pool.begin(), pool.begin() + top_k, ids.begin() + t * top_k);
    }
    ids[0] = 13;  // one token reaches an otherwise unused expert (a 1-row GEMM)
  }
  const auto weights = test::random_f32(ids.size(), rng, 0.1f, 1.0f);
  const auto x = test::random_bf16(size_t(tokens) * k, rng);
  const int kb = k / 128, nb = (n + 127) / 128;
  const int64_t wld = block_scale_ld(k);
  std::vector<std::vector<Fp8E4M3>> w(experts);
  std::vector<std::vector<float>> ws(experts);
  std::vector<DeviceBuffer> dw, dws;
  std::vector<ExpertWeight> expert_weights;
  for (int e = 0; e < experts; ++e) {
    w[e] = test::random_fp8(size_t(n) * k, rng);
    ws[e] = test::random_f32(size_t(nb) * wld, rng, 0.0005f, 0.004f);
    dw.push_back(test::to_device(w[e], stream));
    dws.push_back(test::to_device(ws[e], stream));
    expert_weights.push_back({dw.back().as<Fp8E4M3>(), dws.back().as<float>()});
  }

  auto dx = test::to_device(x, stream);
  auto dids = test::to_device(ids, stream);
  auto dwt = test::to_device(weights, stream);
  auto dxq = test::poisoned<uint8_t>(size_t(tokens) * k, stream);
  auto dxs = test::poisoned<float>(size_t(kb) * tokens, stream);
  quantize_fp8_per_token_block({dx.as<Bf16>(), dxq.as<Fp8E4M3>(), dxs.as<float>(), tokens, k, k, k,
                                tokens},
                               stream);
  auto doff = test::poisoned<int32_t>(experts + 1, stream);
  auto dcur = test::poisoned<int32_t>(experts, stream);
  auto dslot = test::poisoned<int32_t>(ids.size(), stream);
  moe_expert_offsets({dids.as<int32_t>(), doff.as<int32_t>(), dcur.as<int32_t>(),
                      dslot.as<int32_t>(), tokens, top_k, experts},
                     stream);
  const int rows = tokens * top_k;
  auto dperm = test::poisoned<uint8_t>(size_t(rows) * k, stream);
  auto dperm_s = test::poisoned<float>(grouped_scale_floats(kb, rows, experts), stream);
  MoePermuteParams pp;
  pp.x = dxq.as<Fp8E4M3>();
  pp.x_scales = dxs.as<float>();
  pp.topk_ids = dids.as<int32_t>();
  pp.slot_rows = dslot.as<int32_t>();
  pp.expert_offsets = doff.as<int32_t>();
  pp.out = dperm.as<Fp8E4M3>();
  pp.out_scales = dperm_s.as<float>();
  pp.tokens = tokens;
  pp.top_k = top_k;
  pp.cols = k;
  pp.x_scale_ld = tokens;
  moe_permute_fp8(pp, stream);
  const auto offsets = test::to_host<int32_t>(doff, experts + 1, stream);
  const auto slots = test::to_host<int32_t>(dslot, ids.size(), stream);

  // Offsets are the exclusive scan of the counts; every row is used once, inside its expert.
  std::vector<int> routed(experts, 0);
  for (int id : ids) ++routed[id];
  int run = 0;
  for (int e = 0; e <= experts; ++e) {
    EXPECT_EQ(offsets[e], run) << "expert " << e;
    if (e < experts) run += routed[e];
  }
  if (exact) {
    EXPECT_TRUE(std::equal(routed.begin(), routed.end(), counts.begin()));
  }
  std::vector<int> seen(rows, 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    ASSERT_GE(slots[i], offsets[ids[i]]);
    ASSERT_LT(slots[i], offsets[ids[i] + 1]);
    ++seen[slots[i]];
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));

  const auto xq = test::to_host<uint8_t>(dxq, size_t(tokens) * k, stream);
  const auto xs = test::to_host<float>(dxs, size_t(kb) * tokens, stream);
  // The reference in double over the dequantised operands (each decoded and scaled once: the
  // decode and scale lookups in the inner loop were most of these tests' time).
  std::vector<double> xd(size_t(tokens) * k), wd(size_t(n) * k);
  for (int t = 0; t < tokens; ++t)
    for (int l = 0; l < k; ++l)
      xd[size_t(t) * k + l] = double{fp8_e4m3_to_float(xq[size_t(t) * k + l])} * xs[size_t(l / 128) * tokens + t];
  std::vector<double> ref(size_t(tokens) * n, 0.0);
  for (int e = 0; e < experts; ++e) {
    if (routed[e] == 0) continue;
    for (int i = 0; i < n; ++i)
      for (int l = 0; l < k; ++l)
        wd[size_t(i) * k + l] = double{w[e][size_t(i) * k + l].to_float()} * ws[e][size_t(i / 128) * wld + l / 128];
    for (int t = 0; t < tokens; ++t)
      for (int j = 0; j < top_k; ++j) {
        if (ids[t * top_k + j] != e) continue;
        for (int i = 0; i < n; ++i) {
          double acc = 0.0;
          for (int l = 0; l < k; ++l) acc += xd[size_t(t) * k + l] * wd[size_t(i) * k + l];
          ref[size_t(t) * n + i] += weights[t * top_k + j] * acc;
        }
      }
  }
  auto check = [&](GroupedFp8Gemm& gemm, std::span<const ExpertWeight> ew, const char* pass) {
    auto dy = test::poisoned<Bf16>(size_t(rows) * n, stream);
    gemm.run(offsets, doff.as<int32_t>(), ew, dperm.as<Fp8E4M3>(), dperm_s.as<float>(),
             dy.as<Bf16>(), n, stream);
    auto dout = test::poisoned<Bf16>(size_t(tokens) * n, stream);
    moe_unpermute({dy.as<Bf16>(), dslot.as<int32_t>(), dwt.as<float>(), dout.as<Bf16>(), tokens,
                   top_k, n, n, n},
                  stream);
    const auto out = test::to_float(test::to_host<Bf16>(dout, size_t(tokens) * n, stream));
    // Each expert output is rounded to BF16 once before the weighted sum: 5e-3 is generous.
    EXPECT_LT(test::normalized_error(out, ref), 5e-3) << gemm_backend_name(gemm.backend()) << pass;
    return out;
  };
  for (const GemmBackend backend : backends) {
    if (backend == GemmBackend::kHymoe && !fp8_block_gemm_supported()) continue;
    GroupedFp8Gemm gemm(lt, n, k, backend);
    const std::vector<float> one_stream = check(gemm, expert_weights, "");
    if (backend == GemmBackend::kCublasLt) {
      // Spread over streams: the same plans on the same rows, so the same bits; 3 streams for
      // uneven lanes, then 16, more than the 12 experts with rows (the lanes are capped).
      EXPECT_THROW(gemm.set_streams(0), Error);
      EXPECT_THROW(gemm.set_streams(GroupedFp8Gemm::kMaxStreams + 1), Error);
      for (const int streams : {3, GroupedFp8Gemm::kMaxStreams}) {
        gemm.set_streams(streams);
        EXPECT_EQ(check(gemm, expert_weights, " (streams)"), one_stream) << streams << " streams";
      }
    }
    if (!is_grouped_tma_backend(backend)) continue;
    // The per-expert tensor maps: a second run reuses them; a third, with the same weights at
    // new addresses, must re-encode every used expert's map (stale maps would read freed or
    // wrong memory).
    check(gemm, expert_weights, " (cached maps)");
    std::vector<DeviceBuffer> dw2;
    std::vector<ExpertWeight> moved;
    for (int e = 0; e < experts; ++e) {
      dw2.push_back(test::to_device(w[e], stream));
      moved.push_back({dw2.back().as<Fp8E4M3>(), expert_weights[e].scales});
    }
    check(gemm, moved, " (moved weights)");
  }
}

TEST(Moe, PipelineMatchesReference) {
  HYMOE_REQUIRE_GPU();
  CublasLt lt;
  const int k = kPipeK, n = kPipeN;
  if (!GemmPlan::supported(lt, GemmKind::kFp8BlockScale, {64, n, k, k, k, n}) &&
      !fp8_block_gemm_supported()) {
    ASSERT_NE(query_device(0).sm(), 90) << "block-scaled FP8 GEMM unsupported on sm_90";
    GTEST_SKIP() << "no block-scaled FP8 GEMM on this GPU (neither cuBLASLt nor FP8 mma.sync)";
  }
  // ~110 rows per used expert: two 64-row tiles each in the one-launch mma.sync kernel; and one
  // cuBLASLt plan per expert.
  check_pipeline(300, {GemmBackend::kHymoe, GemmBackend::kCublasLt});
}

// A GPU with hymoe's wgmma kernels (sm_90a), else the test skips.
#define HYMOE_REQUIRE_WGMMA()                                                                     \
  HYMOE_REQUIRE_GPU();                                                                            \
  if (!fp8_block_gemm_wgmma_supported())                                                          \
  GTEST_SKIP() << "no wgmma kernel for sm_" << query_device(0).sm() << " in this build (sm_90a only)"

TEST(Moe, WgmmaPipelineMatchesReference) {
  HYMOE_REQUIRE_WGMMA();
  CublasLt lt;
  EXPECT_EQ(GroupedFp8Gemm(lt, kPipeN, kPipeK).backend(), GemmBackend::kWgmmaWsTmaGroupedScMW);  // kAuto, sm_90
  // ~220 rows per used expert: two 128-row tiles (or four 64-row ones) each, the last partial;
  // a 1-row expert, empty ones. kWgmmaWs*: the persistent warp-specialised kernels;
  // kWgmmaWsTmaGrouped: with TMA loads (A's boxes cross into the next expert's rows);
  // kWgmmaWsTmaGroupedSt: the same storing through shared memory (n = 320: a partial column tile).
  // The opt-in variants: kWgmmaWsTmaGroupedSc (scales through the ring), X (expert-major tile
  // order), ScX (both), ScXH (and tiles of <= 64 rows as two 64 x 64 column halves); C, ScC,
  // ScXC (the cross-step schedule; more K depths in the remainders test).
  check_pipeline(600, {GemmBackend::kWgmma, GemmBackend::kWgmma64, GemmBackend::kWgmmaWs,
                       GemmBackend::kWgmmaWsPipe, GemmBackend::kWgmmaWs64,
                       GemmBackend::kWgmmaWsTmaGrouped, GemmBackend::kWgmmaWsTmaGroupedSt,
                       GemmBackend::kWgmmaWsTmaGroupedSc, GemmBackend::kWgmmaWsTmaGroupedX,
                       GemmBackend::kWgmmaWsTmaGroupedScX, GemmBackend::kWgmmaWsTmaGroupedScXH,
                       GemmBackend::kWgmmaWsTmaGroupedC, GemmBackend::kWgmmaWsTmaGroupedScC,
                       GemmBackend::kWgmmaWsTmaGroupedScXC, GemmBackend::kWgmmaWsTmaGroupedScCM,
                       GemmBackend::kWgmmaWsTmaGroupedScMW, GemmBackend::kWgmmaTmaGroupedTx});
  // The TMA variants need one tensor map per weight: dense GEMMs only.
  EXPECT_THROW(GroupedFp8Gemm(lt, kPipeN, kPipeK, GemmBackend::kWgmmaWsTma), Error);
  EXPECT_THROW(GroupedFp8Gemm(lt, kPipeN, kPipeK, GemmBackend::kWgmmaWsTmaC), Error);
  // ... and the grouped TMA variant is the grouped GEMM's only.
  for (const GemmBackend grouped_only :
       {GemmBackend::kWgmmaWsTmaGrouped, GemmBackend::kWgmmaWsTmaGroupedSt,
        GemmBackend::kWgmmaWsTmaGroupedSc, GemmBackend::kWgmmaWsTmaGroupedX,
        GemmBackend::kWgmmaWsTmaGroupedScX, GemmBackend::kWgmmaWsTmaGroupedScXH,
        GemmBackend::kWgmmaWsTmaGroupedC, GemmBackend::kWgmmaWsTmaGroupedScC,
        GemmBackend::kWgmmaWsTmaGroupedScXC, GemmBackend::kWgmmaWsTmaGroupedScCM,
        GemmBackend::kWgmmaWsTmaGroupedScMW, GemmBackend::kWgmmaTmaGroupedTx})
    EXPECT_THROW(GemmPlan(lt, GemmKind::kFp8BlockScale,
                          {256, kPipeN, kPipeK, kPipeK, kPipeK, kPipeN}, grouped_only),
                 Error);
}

// The grouped TMA kernels on chosen expert sizes: empty experts, 1-row experts, remainders past
// whole 128-row tiles of 1, 63, 64, 65 and 127 rows, ~128 and ~512 rows per expert (top 1
// routing, so each expert gets exactly its count). Four tests, each within ctest's limit (as one
// it took 115 of gpu-check's 120 s on the H200).
const std::vector<int> kRemainderCounts = {0,  1,   129, 0,   191, 192, 193, 255, 1,  128,
                                           63, 512, 64,  65,  127, 0,   509, 130, 126, 0};

TEST(Moe, WgmmaGroupedRemaindersMatchReference) {
  HYMOE_REQUIRE_WGMMA();
  check_pipeline(0,
                 {GemmBackend::kWgmmaWsTmaGrouped, GemmBackend::kWgmmaWsTmaGroupedSt,
                  GemmBackend::kWgmmaWsTmaGroupedSc, GemmBackend::kWgmmaWsTmaGroupedX,
                  GemmBackend::kWgmmaWsTmaGroupedScX, GemmBackend::kWgmmaWsTmaGroupedScXH,
                  GemmBackend::kWgmmaWsTmaGroupedC, GemmBackend::kWgmmaWsTmaGroupedScC,
                  GemmBackend::kWgmmaWsTmaGroupedScXC, GemmBackend::kWgmmaWsTmaGroupedScCM,
                  GemmBackend::kWgmmaWsTmaGroupedScMW, GemmBackend::kWgmmaTmaGroupedTx},
                 kRemainderCounts);
}

// The cross-step schedule's three K loop paths: 1 block (odd: no loop, the drain only), 4 (even:
// block 0 into the second partial, one step, one unrolled pair), 5 (odd: two pairs).
TEST(Moe, WgmmaGroupedCrossStepDepthsMatchReference) {
  HYMOE_REQUIRE_WGMMA();
  for (const int k : {128, 512, 640})
    check_pipeline(0,
                   {GemmBackend::kWgmmaWsTmaGroupedC, GemmBackend::kWgmmaWsTmaGroupedScC,
                    GemmBackend::kWgmmaWsTmaGroupedScXC, GemmBackend::kWgmmaWsTmaGroupedScCM},
                   kRemainderCounts, k);
}

// The 128 x 192 tiles (ScMW) across widths: n = 320 (kPipeN, above) has a column tile at 0 (its
// weight-scale blocks split at column 128) and one at 192 (split at 64, cut at 320); 200: the
// second tile's second block past n (scale 0), at K depths 128 and 640 (one K block; more than
// the ring's 5 slots); 576: three column tiles (pairs over two row tiles, the last pair's second
// CTA past n when the tile count is odd); 448: three tiles, the last one (64 columns, all before
// its split at 128, its second block past n) like the last of gate / up's 11 (2048 columns). One
// K block for the wider ones (the reference's cost).
TEST(Moe, WgmmaGroupedWideTilesMatchReference) {
  HYMOE_REQUIRE_WGMMA();
  for (const int k : {128, 640})
    check_pipeline(0, {GemmBackend::kWgmmaWsTmaGroupedScMW}, kRemainderCounts, k, 200);
  for (const int n : {448, 576})
    check_pipeline(0, {GemmBackend::kWgmmaWsTmaGroupedScMW}, kRemainderCounts, 128, n);
}

// kWgmmaTmaGroupedTx: K depths 128 and 640 (more K blocks than its 5 slots: the ring carried
// across tiles at an offset), widths 200 (a partial column tile) and 576. The permuted scales'
// padding stays poisoned (NaN): the rows of a tile past its expert's end read it. Then a whole
// layer smaller than one tile (8 rows over 3 experts, one empty): the TMA boxes (128 rows of A,
// Tx's 132 floats of A scales) are larger than the tensors they read from.
TEST(Moe, WgmmaGroupedTxAndTinyMatchReference) {
  HYMOE_REQUIRE_WGMMA();
  for (const int k : {128, 640})
    check_pipeline(0, {GemmBackend::kWgmmaTmaGroupedTx}, kRemainderCounts, k, 200);
  check_pipeline(0, {GemmBackend::kWgmmaTmaGroupedTx}, kRemainderCounts, 128, 576);
  const std::vector<int> tiny = {3, 0, 5};
  check_pipeline(0, {GemmBackend::kWgmmaWsTmaGroupedScMW, GemmBackend::kWgmmaTmaGroupedTx}, tiny,
                 128, 200);
}

TEST(Moe, UnpermuteAddSumsOneBatchOfExperts) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  Stream stream;
  const int tokens = 37, top_k = 4, experts = 16, cols = 264, e0 = 5, e1 = 11;
  const int64_t ldo = cols + 4;
  std::vector<int32_t> ids(size_t(tokens) * top_k);
  std::vector<float> weights(ids.size());
  for (int t = 0; t < tokens; ++t) {
    std::vector<int32_t> all(experts);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < top_k; ++j) {
      ids[size_t(t) * top_k + j] = all[size_t(j)];
      weights[size_t(t) * top_k + j] = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
    }
  }
  // Rows in expert order (a counting sort of the slots), as moe_expert_offsets lays them out.
  std::vector<int32_t> offsets(experts + 1, 0), slot_rows(ids.size());
  for (int32_t e : ids) ++offsets[size_t(e) + 1];
  for (int e = 0; e < experts; ++e) offsets[size_t(e) + 1] += offsets[size_t(e)];
  std::vector<int32_t> cursor(offsets.begin(), offsets.end() - 1);
  for (size_t i = 0; i < ids.size(); ++i) slot_rows[i] = cursor[size_t(ids[i])]++;
  const int32_t r0 = offsets[e0], r1 = offsets[e1];
  const auto y = test::random_bf16(size_t(r1 - r0) * cols, rng);  // the batch's rows only
  const auto before = test::random_f32(size_t(tokens) * ldo, rng, -1, 1);
  auto dy = test::to_device(y, stream);
  auto dids = test::to_device(ids, stream);
  auto dw = test::to_device(weights, stream);
  auto dslot = test::to_device(slot_rows, stream);
  auto dout = test::to_device(before, stream);
  moe_unpermute_add({.y = dy.as<Bf16>(), .slot_rows = dslot.as<int32_t>(), .topk_ids = dids.as<int32_t>(),
                     .topk_weights = dw.as<float>(), .out = dout.as<float>(), .tokens = tokens, .top_k = top_k,
                     .cols = cols, .ldy = cols, .ldo = ldo, .expert_begin = e0, .expert_end = e1, .row_begin = r0},
                    stream);
  const auto out = test::to_host<float>(dout, before.size(), stream);
  for (int t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < ldo; ++c) {
      double expect = before[size_t(t) * ldo + c];
      if (c < cols) {
        for (int j = 0; j < top_k; ++j) {
          const size_t slot = size_t(t) * top_k + j;
          if (ids[slot] < e0 || ids[slot] >= e1) continue;
          expect += double(weights[slot]) * y[size_t(slot_rows[slot] - r0) * cols + c].to_float();
        }
      }
      ASSERT_NEAR(out[size_t(t) * ldo + c], expect, 1e-5 * (1 + std::fabs(expect))) << "token " << t << " column " << c;
    }
  }
  EXPECT_THROW(moe_unpermute_add({.tokens = 1, .top_k = 1, .cols = 12, .ldy = 12, .ldo = 12}, stream), Error);
}

TEST(Moe, QuantiserWritesGroupedScales) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  Stream stream;
  const int rows = 77, cols = 384, kb = 3;
  const std::vector<int32_t> offsets = {0, 0, 20, 21, 21, 60, 77};  // empty groups included
  const auto x = test::random_bf16(size_t(rows) * cols, rng);
  auto dx = test::to_device(x, stream);
  auto doff = test::to_device(offsets, stream);
  auto dq1 = test::poisoned<uint8_t>(size_t(rows) * cols, stream);
  auto dq2 = test::poisoned<uint8_t>(size_t(rows) * cols, stream);
  auto ds1 = test::poisoned<float>(size_t(kb) * rows, stream);
  const int groups = static_cast<int>(offsets.size()) - 1;
  auto ds2 = test::poisoned<float>(grouped_scale_floats(kb, rows, groups), stream);
  Fp8QuantParams plain{dx.as<Bf16>(), dq1.as<Fp8E4M3>(), ds1.as<float>(), rows, cols, cols, cols, rows};
  quantize_fp8_per_token_block(plain, stream);
  Fp8QuantParams grouped = plain;
  grouped.out = dq2.as<Fp8E4M3>();
  grouped.scales = ds2.as<float>();
  grouped.group_offsets = doff.as<int32_t>();
  grouped.groups = groups;
  quantize_fp8_per_token_block(grouped, stream);
  const auto s1 = test::to_host<float>(ds1, size_t(kb) * rows, stream);
  const auto s2 = test::to_host<float>(ds2, grouped_scale_floats(kb, rows, groups), stream);
  EXPECT_EQ(test::to_host<uint8_t>(dq1, size_t(rows) * cols, stream),
            test::to_host<uint8_t>(dq2, size_t(rows) * cols, stream));
  for (size_t g = 0; g + 1 < offsets.size(); ++g) {
    const int off = offsets[g], m = offsets[g + 1] - off;
    for (int t = off; t < off + m; ++t)
      for (int b = 0; b < kb; ++b)
        EXPECT_EQ(s2[grouped_scale_offset(kb, off, static_cast<int>(g)) + size_t(b) * m + (t - off)],
                  s1[size_t(b) * rows + t])
            << "group " << g << " row " << t << " block " << b;
  }
}

}  // namespace
}  // namespace hymoe::gpu

namespace hymoe::gpu {
namespace {

// kWgmmaWsTmaGrouped's map table: slots 64-byte aligned (PTX's rule for global tensor maps); encoded only for experts with rows
// whose weight changed; kept for experts without rows; all again after invalidate().
TEST(GpuHost, ExpertTensorMapTableEncodesOnlyStaleUsedExperts) {
  static_assert(kTensorMapBytes == 128 && alignof(TensorMapBytes) == 128);
  for (int e = 0; e < 300; ++e) EXPECT_EQ(ExpertTensorMapTable::slot_offset(e) % 64, 0u);
  EXPECT_EQ(ExpertTensorMapTable::slot_offset(3), 3 * kTensorMapBytes);
  int buf[5] = {};
  std::vector<const void*> w = {&buf[0], &buf[1], &buf[2], &buf[3], &buf[4]};
  auto weight = [&](size_t e) { return w[e]; };
  auto list = [](std::span<const int> s) { return std::vector<int>(s.begin(), s.end()); };
  ExpertTensorMapTable table;
  const std::vector<int32_t> off1 = {0, 3, 3, 4, 10, 10};  // experts 1 and 4 empty
  EXPECT_EQ(list(table.stale(off1, 5, weight)), (std::vector<int>{0, 2, 3}));
  EXPECT_TRUE(table.stale(off1, 5, weight).empty());       // nothing changed
  const std::vector<int32_t> off2 = {0, 0, 2, 4, 4, 9};    // now 1 and 4 have rows, 0 and 3 none
  EXPECT_EQ(list(table.stale(off2, 5, weight)), (std::vector<int>{1, 4}));
  w[2] = &buf[4];                                          // a new weight for a used expert
  w[0] = &buf[3];                                          // and for an unused one
  EXPECT_EQ(list(table.stale(off2, 5, weight)), (std::vector<int>{2}));
  EXPECT_EQ(list(table.stale(off1, 5, weight)), (std::vector<int>{0}));  // 0 used again
  table.invalidate();
  EXPECT_EQ(list(table.stale(off1, 5, weight)), (std::vector<int>{0, 2, 3}));
  // Another expert count starts over.
  const std::vector<int32_t> off3 = {0, 1, 2};
  EXPECT_EQ(list(table.stale(off3, 2, weight)), (std::vector<int>{0, 1}));
}

TEST(GpuHost, GroupedScaleBlocksAreAlignedAndDisjoint) {
  for (int col_blocks : {1, 2, 16, 56}) {
    const std::vector<int64_t> offsets = {0, 3, 3, 10, 11, 30};
    for (size_t g = 0; g + 1 < offsets.size(); ++g) {
      const int64_t start = grouped_scale_offset(col_blocks, offsets[g], static_cast<int>(g));
      const int64_t next = grouped_scale_offset(col_blocks, offsets[g + 1], static_cast<int>(g) + 1);
      EXPECT_EQ(start % 4, 0) << "16-byte alignment";
      EXPECT_GE(next, start + col_blocks * (offsets[g + 1] - offsets[g])) << "overlap";
    }
    EXPECT_GE(grouped_scale_floats(col_blocks, 30, 5),
              grouped_scale_offset(col_blocks, 11, 4) + col_blocks * 19);
  }
}

}  // namespace
}  // namespace hymoe::gpu
