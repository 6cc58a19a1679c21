// MLA decode attention against a float64 reference over a paged cache with a shuffled block
// table: ragged batches, a 1-token and a 64K-token sequence, forced split counts, block sizes 1,
// 16, 32 and 64; every implementation (the wgmma ones where the heads come in 64-head groups;
// kWgmmaPingPong both with its TMA loads and with cp.async). The cache rows past each sequence's
// end in its last block are NaN, as an unwritten cache may be: no implementation may read them
// into its result.
#include <gtest/gtest.h>

#include <ostream>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "gpu_test_util.h"
#include "hymoe/gpu/mla_decode.h"
#include "hymoe/gpu/mla_decode_plan.h"

namespace hymoe::gpu {
namespace {

struct MlaCase {
  int heads, block_size;
  std::vector<int> lens;
  int splits;  // 0: the heuristic's
};
void PrintTo(const MlaCase& c, std::ostream* os) {
  *os << c.heads << " heads, " << c.lens.size() << " seqs up to " << *std::max_element(c.lens.begin(), c.lens.end()) << ", splits " << c.splits;
}

class MlaDecodeTest : public ::testing::TestWithParam<MlaCase> {};

struct ImplRun {
  MlaDecodeImpl impl;
  const char* name;
  bool cache_blocks = true;  // MlaDecodeParams::cache_blocks given (kWgmmaPingPong: TMA at block size 64)
  bool planned = false;      // with a work list from mla_decode_plan
  bool segmented = false;    // with a segmented list from mla_decode_plan_segments
};

// Every implementation in the list, also with a work list.
std::vector<ImplRun> with_planned(std::vector<ImplRun> impls) {
  const size_t n = impls.size();
  for (size_t i = 0; i < n; ++i) {
    ImplRun r = impls[i];
    r.planned = true;
    impls.push_back(r);
  }
  return impls;
}

// Runs the given implementations on case c, each on freshly poisoned output and workspace, and
// checks each against a float64 reference.
void check_case(const MlaCase& c, const std::vector<ImplRun>& impls) {
  auto rng = test::make_rng();
  Stream stream;
  const int batch = static_cast<int>(c.lens.size());
  const int max_len = *std::max_element(c.lens.begin(), c.lens.end());
  const int max_blocks = (max_len + c.block_size - 1) / c.block_size;
  const int num_blocks = batch * max_blocks + 3;
  // A shuffled block table: logical block j of sequence b lives in a random physical block.
  std::vector<int32_t> perm(num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(size_t(batch) * max_blocks);
  for (size_t i = 0; i < table.size(); ++i) table[i] = perm[i];
  auto cache = test::random_bf16(size_t(num_blocks) * c.block_size * kMlaHeadDim, rng);
  for (int b = 0; b < batch; ++b)  // NaN past the end, within the last block
    for (int t = c.lens[b]; t % c.block_size != 0; ++t) {
      const size_t row = size_t(table[b * max_blocks + t / c.block_size]) * c.block_size + t % c.block_size;
      for (int d = 0; d < kMlaHeadDim; ++d) cache[row * kMlaHeadDim + d] = Bf16{0x7FC0};
    }
  const auto q = test::random_bf16(size_t(batch) * c.heads * kMlaHeadDim, rng);
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  const float scale = static_cast<float>(mscale * mscale / std::sqrt(192.0));

  auto dq = test::to_device(q, stream);
  auto dc = test::to_device(cache, stream);
  auto dt = test::to_device(table, stream);
  auto dl = test::to_device(std::vector<int32_t>(c.lens.begin(), c.lens.end()), stream);
  MlaDecodeParams p;
  p.batch = batch;
  p.heads = c.heads;
  p.block_size = c.block_size;
  p.max_blocks = max_blocks;
  p.max_seq_len = max_len;
  const int sms = query_device(0).multiprocessors;
  const int uniform_splits = c.splits ? c.splits : mla_decode_splits(sms, batch, c.heads, max_len);
  const int planned_splits = c.splits ? c.splits : mla_decode_plan_splits(sms, batch, c.heads);
  // The work list for planned runs, as the device's planner writes it: the host mirror's bytes.
  const std::vector<int32_t> plan =
      mla_decode_plan_host(c.lens, planned_splits, mla_decode_wave_items(sms, c.heads));
  DeviceBuffer dplan = test::poisoned<uint8_t>(plan.size() * sizeof(int32_t), stream);
  mla_decode_plan(dl.as<int32_t>(), batch, planned_splits, mla_decode_wave_items(sms, c.heads),
                  dplan.as<int32_t>(), stream);
  EXPECT_EQ(test::to_host<int32_t>(dplan, plan.size(), stream), plan);
  // The segmented list: whole waves of slots, the splits that hold its items.
  const int slots = mla_decode_segment_slots(sms, c.heads, batch);
  const int segment_splits = mla_decode_segment_splits(batch, slots);
  const std::vector<int32_t> segments = mla_decode_plan_segments_host(c.lens, segment_splits, slots);
  DeviceBuffer dseg = test::poisoned<uint8_t>(segments.size() * sizeof(int32_t), stream);
  mla_decode_plan_segments(dl.as<int32_t>(), batch, segment_splits, slots, dseg.as<int32_t>(),
                           stream);
  EXPECT_EQ(test::to_host<int32_t>(dseg, segments.size(), stream), segments);
  p.softmax_scale = scale;
  p.q = dq.as<Bf16>();
  p.kv_cache = dc.as<Bf16>();
  p.block_table = dt.as<int32_t>();
  p.seq_lens = dl.as<int32_t>();
  std::vector<std::vector<float>> outs;
  for (const auto& entry : impls) {
    auto dout = test::poisoned<Bf16>(size_t(batch) * c.heads * kMlaLatentDim, stream);
    p.num_splits = entry.segmented ? segment_splits
                   : entry.planned ? planned_splits
                                   : uniform_splits;
    p.work_list = entry.segmented ? dseg.as<int32_t>()
                  : entry.planned ? dplan.as<int32_t>()
                                  : nullptr;
    p.work_slots = entry.segmented ? slots : 0;
    auto dws = test::poisoned<uint8_t>(mla_decode_workspace_bytes(batch, c.heads, p.num_splits), stream);
    p.out = dout.as<Bf16>();
    p.workspace = dws.as<float>();
    p.impl = entry.impl;
    p.cache_blocks = entry.cache_blocks ? num_blocks : 0;
    mla_decode(p, stream);
    outs.push_back(test::to_float(test::to_host<Bf16>(dout, size_t(batch) * c.heads * kMlaLatentDim, stream)));
  }
  const std::vector<float>& out = outs[0];
  std::vector<double> ref(out.size());
  std::vector<double> score, kv;
  for (int b = 0; b < batch; ++b) {
    const int len = c.lens[b];
    kv.assign(size_t(len) * kMlaHeadDim, 0.0);
    for (int t = 0; t < len; ++t) {
      const size_t row = size_t(table[b * max_blocks + t / c.block_size]) * c.block_size + t % c.block_size;
      for (int d = 0; d < kMlaHeadDim; ++d) kv[size_t(t) * kMlaHeadDim + d] = cache[row * kMlaHeadDim + d].to_float();
    }
    for (int h = 0; h < c.heads; ++h) {
      const Bf16* qh = &q[(size_t(b) * c.heads + h) * kMlaHeadDim];
      score.assign(len, 0.0);
      double mx = -INFINITY;
      for (int t = 0; t < len; ++t) {
        double s = 0.0;
        for (int d = 0; d < kMlaHeadDim; ++d) s += double{qh[d].to_float()} * kv[size_t(t) * kMlaHeadDim + d];
        score[t] = s * scale;
        mx = std::max(mx, score[t]);
      }
      double sum = 0.0;
      for (int t = 0; t < len; ++t) sum += (score[t] = std::exp(score[t] - mx));
      double* o = &ref[(size_t(b) * c.heads + h) * kMlaLatentDim];
      for (int t = 0; t < len; ++t)
        for (int d = 0; d < kMlaLatentDim; ++d) o[d] += score[t] / sum * kv[size_t(t) * kMlaHeadDim + d];
    }
  }
  // FP32 scores and accumulation, BF16 output: normalised error ~2^-9 from the output rounding;
  // the tensor-core kernels also round the probabilities to BF16 before P V (another ~2^-9).
  for (size_t i = 0; i < impls.size(); ++i)
    EXPECT_LT(test::normalized_error(outs[i], ref), 5e-3)
        << impls[i].name << (impls[i].cache_blocks ? "" : " (no cache_blocks)")
        << (impls[i].segmented ? ", segmented list, slots " + std::to_string(slots) + " splits "
            : impls[i].planned ? ", work list, splits "
                               : ", splits ")
        << (impls[i].segmented ? segment_splits
            : impls[i].planned ? planned_splits
                               : uniform_splits);
}

TEST_P(MlaDecodeTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  check_case(GetParam(), with_planned({{MlaDecodeImpl::kTensorCores, "tensor cores"},
                                       {MlaDecodeImpl::kCudaCores, "CUDA cores"},
                                       {MlaDecodeImpl::kAuto, "auto"}}));
}

// The wgmma kernels (sm_90a) in tests of their own, so that a failure there leaves the others'
// results readable (ctest -R Wgmma selects them).
TEST_P(MlaDecodeTest, WgmmaMatchesReference) {
  HYMOE_REQUIRE_GPU();
  if (GetParam().heads % 64 != 0) GTEST_SKIP() << "wgmma takes 64-head groups";
  if (!mla_decode_wgmma_supported())
    GTEST_SKIP() << "wgmma needs compute capability 9.0 and an sm_90a build";
  std::vector<ImplRun> impls = {
      {MlaDecodeImpl::kWgmma, "wgmma"},
      {MlaDecodeImpl::kWgmmaSplitS, "wgmma, split S"},
      {MlaDecodeImpl::kWgmmaPingPong, "wgmma, ping-pong"},
      {MlaDecodeImpl::kWgmmaPingPong, "wgmma, ping-pong, cp.async", false}};
  if (GetParam().block_size == 64) impls.push_back({MlaDecodeImpl::kWgmmaPair, "wgmma, pairs"});
  impls = with_planned(impls);
  impls.push_back({MlaDecodeImpl::kWgmmaPingPong, "wgmma, ping-pong", true, false, true});
  impls.push_back({MlaDecodeImpl::kWgmmaPingPong, "wgmma, ping-pong, cp.async", false, false, true});
  check_case(GetParam(), impls);
}

// One long sequence beside `batch - 1` short ones of ragged lengths (1..1500 tokens).
std::vector<int> long_beside_short(int batch, int long_len) {
  std::vector<int> lens(static_cast<size_t>(batch));
  lens[0] = long_len;
  for (int i = 1; i < batch; ++i) lens[size_t(i)] = 1 + (i * 373) % 1500;
  return lens;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MlaDecodeTest,
    ::testing::Values(MlaCase{128, 64, {1, 37, 300, 1000}, 0},    // DeepSeek-V3, ragged batch
                      MlaCase{128, 64, {1, 37, 300, 1000}, 7},    // forced splits (some empty)
                      MlaCase{64, 16, {5, 129, 2048}, 1},          // Kimi-K2 heads, no split
                      MlaCase{16, 64, {65536}, 0},                 // a 64K context
                      MlaCase{128, 64, {8191, 33}, 0},             // 2 head groups, long
                      MlaCase{128, 64, {8191, 33}, 2},             // 4096-token splits: kAuto pair
                      MlaCase{80, 32, {700}, 3},                   // a partial head group
                      MlaCase{64, 64, {65536, 63}, 0},             // 64K at 64 heads (wgmma too)
                      MlaCase{128, 1, {100, 65, 64}, 2},           // 1-token blocks, tile edges
                      MlaCase{64, 16, {1}, 0},                     // a lone 1-token sequence
                      // mixed lengths (a work list's case): one long beside short ones and
                      // lengths at the tile edges
                      MlaCase{128, 64, {8191, 1, 64, 65, 1000, 127, 129, 300}, 0},
                      MlaCase{64, 64, {30000, 1024, 1024, 1024, 1024, 1024, 1024, 1024}, 0},
                      MlaCase{128, 64, long_beside_short(40, 20000), 0}));  // near a wave

// Shapes for the host-side checks below: one 64-token cache block a sequence, the cache's extent
// given (kWgmmaPair's TMA needs it), nothing that touches a device.
MlaDecodeParams checked_shapes(int batch, int heads) {
  MlaDecodeParams p;
  p.batch = batch;
  p.heads = heads;
  p.block_size = 64;
  p.max_blocks = 1;
  p.max_seq_len = 64;
  p.cache_blocks = 4;
  return p;
}

// The wgmma implementation takes 64-head blocks: other head counts are refused before anything
// touches the device (host-only).
TEST(GpuHost, MlaWgmmaRejectsHeadsNotMultipleOf64) {
  MlaDecodeParams p = checked_shapes(1, 80);
  for (const MlaDecodeImpl impl : {MlaDecodeImpl::kWgmma, MlaDecodeImpl::kWgmmaSplitS,
                                    MlaDecodeImpl::kWgmmaPingPong, MlaDecodeImpl::kWgmmaPair}) {
    p.impl = impl;
    EXPECT_ANY_THROW(mla_decode(p, nullptr));
  }
  p.heads = 128;
  p.batch = 0;  // the same shapes with 128 heads pass the checks (an empty batch returns)
  for (const MlaDecodeImpl impl : {MlaDecodeImpl::kWgmma, MlaDecodeImpl::kWgmmaSplitS,
                                    MlaDecodeImpl::kWgmmaPingPong, MlaDecodeImpl::kWgmmaPair}) {
    p.impl = impl;
    EXPECT_NO_THROW(mla_decode(p, nullptr));
  }
  // kWgmmaPair loads by TMA only: 64-token blocks and the cache's extent given.
  p.cache_blocks = 0;
  EXPECT_ANY_THROW(mla_decode(p, nullptr));
  p.cache_blocks = 4;
  p.block_size = 32;
  p.max_blocks = 2;
  EXPECT_ANY_THROW(mla_decode(p, nullptr));
}

// A segmented list (work_slots) is walked by kWgmmaPingPong only, must be given, and its items
// must fit batch x num_splits; refused before anything touches the device.
TEST(GpuHost, MlaSegmentedListChecks) {
  alignas(16) static int32_t list[64] = {};
  MlaDecodeParams p = checked_shapes(0, 128);  // (the accepted ones return: an empty batch)
  p.num_splits = 2;
  p.work_list = list;
  p.work_slots = 1;
  p.impl = MlaDecodeImpl::kWgmmaPingPong;
  EXPECT_NO_THROW(mla_decode(p, nullptr));
  for (const MlaDecodeImpl impl : {MlaDecodeImpl::kWgmma, MlaDecodeImpl::kWgmmaSplitS,
                                    MlaDecodeImpl::kWgmmaPair,
                                    MlaDecodeImpl::kTensorCores, MlaDecodeImpl::kCudaCores}) {
    p.impl = impl;
    EXPECT_ANY_THROW(mla_decode(p, nullptr));
  }
  p.impl = MlaDecodeImpl::kWgmmaPingPong;
  p.work_list = nullptr;
  EXPECT_ANY_THROW(mla_decode(p, nullptr));
  p.work_list = list;
  p.batch = 2;
  p.work_slots = 4;  // 5 items at most, 4 held
  EXPECT_ANY_THROW(mla_decode(p, nullptr));
  p.work_slots = -1;
  EXPECT_ANY_THROW(mla_decode(p, nullptr));
}

// kAuto: where the tiles come by TMA (64-token blocks, the cache's extent given) the pair kernel
// for splits known to be long or short (<= 256 tokens), else the ping-pong (also where a split's
// tokens are unknown: 0); split-S wgmma elsewhere it can run, else the
// mma.sync kernel; the splits follow the kernel.
TEST(GpuHost, MlaDecodeAutoResolution) {
  const bool wgmma = mla_decode_wgmma_supported();
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128),
            wgmma ? MlaDecodeImpl::kWgmmaSplitS : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 64, 1000),
            wgmma ? MlaDecodeImpl::kWgmmaPingPong : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 64, 1000, kMlaPairMinSplitTokens - 1),
            wgmma ? MlaDecodeImpl::kWgmmaPingPong : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 64, 1000, kMlaPairMinSplitTokens),
            wgmma ? MlaDecodeImpl::kWgmmaPair : MlaDecodeImpl::kTensorCores);
  for (int short_split : {1, 128, kMlaPairMaxShortSplitTokens})
    EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 64, 1000, short_split),
              wgmma ? MlaDecodeImpl::kWgmmaPair : MlaDecodeImpl::kTensorCores)
        << short_split;
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 64, 1000, kMlaPairMaxShortSplitTokens + 1),
            wgmma ? MlaDecodeImpl::kWgmmaPingPong : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 32, 1000, 128),  // no TMA, no pair
            wgmma ? MlaDecodeImpl::kWgmmaSplitS : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 32, 1000),
            wgmma ? MlaDecodeImpl::kWgmmaSplitS : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 32, 1000, 8192),  // no TMA, no pair
            wgmma ? MlaDecodeImpl::kWgmmaSplitS : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 128, 64, 0),
            wgmma ? MlaDecodeImpl::kWgmmaSplitS : MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 80), MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kAuto, 80, 64, 1000), MlaDecodeImpl::kTensorCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kCudaCores, 128), MlaDecodeImpl::kCudaCores);
  EXPECT_EQ(mla_decode_resolve(MlaDecodeImpl::kWgmma, 80), MlaDecodeImpl::kWgmma);  // refused later
  EXPECT_EQ(mla_decode_splits_for(MlaDecodeImpl::kWgmmaSplitS, 132, 1, 128, 65536),
            mla_decode_wgmma_splits(132, 1, 128, 65536));
  EXPECT_EQ(mla_decode_splits_for(MlaDecodeImpl::kTensorCores, 132, 1, 128, 65536),
            mla_decode_splits(132, 1, 128, 65536));
  EXPECT_EQ(mla_decode_splits_for(MlaDecodeImpl::kAuto, 132, 8, 80, 65536),
            mla_decode_splits(132, 8, 80, 65536));
}

TEST(GpuHost, MlaWgmmaSplitHeuristic) {
  EXPECT_EQ(mla_decode_wgmma_splits(132, 1, 128, 100), 1);      // short: one chunk
  EXPECT_EQ(mla_decode_wgmma_splits(132, 1, 128, 65536), 66);   // 2 head groups x 66 = 132 SMs
  EXPECT_EQ(mla_decode_wgmma_splits(132, 8, 128, 65536), 8);    // 16 x 8 = 128 blocks
  EXPECT_EQ(mla_decode_wgmma_splits(132, 3, 128, 65536), 22);   // 6 x 22 = 132
  EXPECT_EQ(mla_decode_wgmma_splits(132, 1, 128, 1024), 8);     // chunks of >= 128 tokens
  EXPECT_EQ(mla_decode_wgmma_splits(132, 1, 128, 1151), 8);     // not 9 chunks of 128 - 0
  EXPECT_EQ(mla_decode_wgmma_splits(132, 1, 128, 1152), 9);
  EXPECT_EQ(mla_decode_wgmma_splits(132, 4, 128, 1024), 8);     // 64 blocks of 128 tokens
  // 128-token chunks would fill half the SMs or more: chunks of >= 256 tokens.
  EXPECT_EQ(mla_decode_wgmma_splits(132, 8, 128, 1024), 4);     // not 128 blocks of 128
  EXPECT_EQ(mla_decode_wgmma_splits(132, 1, 128, 8192), 32);    // not 128 blocks of 128
  EXPECT_EQ(mla_decode_wgmma_splits(132, 4, 128, 8192), 16);    // 512 tokens anyway
  EXPECT_EQ(mla_decode_wgmma_splits(132, 1, 128, 16384), 64);   // 256 tokens: one wave
  EXPECT_EQ(mla_decode_wgmma_splits(132, 66, 128, 65536), 1);   // the head groups fill the GPU
  EXPECT_EQ(mla_decode_wgmma_splits(132, 200, 128, 65536), 1);  // more than one wave anyway
  EXPECT_EQ(mla_decode_wgmma_splits(8, 1, 64, 1 << 30), 8);
  // Never more blocks than SMs where more than one split is chosen; chunks >= 128 tokens, and
  // >= 256 where the blocks fill half the SMs or more.
  for (int batch = 1; batch <= 70; ++batch)
    for (int len : {1, 127, 128, 129, 1000, 4096, 65536}) {
      const int splits = mla_decode_wgmma_splits(132, batch, 128, len);
      EXPECT_GE(splits, 1);
      if (splits > 1) {
        EXPECT_LE(splits * batch * 2, 132) << batch << " " << len;
        EXPECT_GE((len + splits - 1) / splits, 128) << batch << " " << len;
        if (splits * batch * 2 >= 66) {
          EXPECT_GE((len + splits - 1) / splits, 256) << batch << " " << len;
        }
      }
    }
}

// The planner kernel against its host mirror, byte for byte, on batches past one scan tile of
// its 512 threads (the first-item scan carries across tiles) and on lengths up to 1M tokens;
// the list's buffer poisoned first.
TEST(MlaDecodePlanDevice, MatchesHostMirror) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  Stream stream;
  for (const int batch : {1, 7, 511, 512, 513, 1500, 5000})
    for (const int wave : {66, 132}) {
      std::vector<int32_t> lens(static_cast<size_t>(batch));
      for (auto& len : lens)
        len = 1 + static_cast<int32_t>(rng() % (rng() % 16 == 0 ? (1 << 20) : 4096));
      for (const int splits : {1, mla_decode_plan_splits(2 * wave, batch, 128), 3}) {
        const std::vector<int32_t> want = mla_decode_plan_host(lens, splits, wave);
        auto dl = test::to_device(lens, stream);
        auto dlist = test::poisoned<uint8_t>(want.size() * sizeof(int32_t), stream);
        mla_decode_plan(dl.as<int32_t>(), batch, splits, wave, dlist.as<int32_t>(), stream);
        EXPECT_EQ(test::to_host<int32_t>(dlist, want.size(), stream), want)
            << "batch " << batch << " splits " << splits << " wave " << wave;
      }
    }
}

// The segmented planner kernel against its host mirror, byte for byte (as above), slots of one
// to a few waves.
TEST(MlaDecodePlanDevice, SegmentsMatchHostMirror) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  Stream stream;
  for (const int batch : {1, 7, 40, 511, 512, 513, 1500, 5000})
    for (const int wave : {66, 132}) {
      std::vector<int32_t> lens(static_cast<size_t>(batch));
      for (auto& len : lens)
        len = 1 + static_cast<int32_t>(rng() % (rng() % 16 == 0 ? (1 << 20) : 4096));
      const int slots = mla_decode_segment_slots(2 * wave, 128, batch);
      for (const int splits : {mla_decode_segment_splits(batch, slots), 3 + slots / batch})
        for (const int cost : {0, kMlaSegmentCostTiles, 5}) {
          const std::vector<int32_t> want =
              mla_decode_plan_segments_host(lens, splits, slots, cost);
          auto dl = test::to_device(lens, stream);
          auto dlist = test::poisoned<uint8_t>(want.size() * sizeof(int32_t), stream);
          mla_decode_plan_segments(dl.as<int32_t>(), batch, splits, slots, dlist.as<int32_t>(),
                                   stream, cost);
          EXPECT_EQ(test::to_host<int32_t>(dlist, want.size(), stream), want)
              << "batch " << batch << " splits " << splits << " slots " << slots << " cost "
              << cost;
        }
    }
}

// A work list's items, each sequence's first item, each slot's first item (mla_decode_plan.h).
struct ListParts {
  const int32_t *item, *first, *slot_first;
};
ListParts list_parts(const std::vector<int32_t>& list, int batch, int items) {
  const int32_t* item = list.data() + kMlaWorkHeaderInts;
  const int32_t* first = item + kMlaWorkItemInts * items;
  return {item, first, first + batch + 1};
}

// Each sequence b's items (first[b] .. first[b + 1]) name b and cover [0, lens[b]) in order, one
// after another; check(b, i, w) adds the caller's assertions on item i (its ints at w).
template <typename Check>
void expect_sequences_covered(const ListParts& parts, const std::vector<int32_t>& lens, Check check) {
  for (int b = 0; b < static_cast<int>(lens.size()); ++b) {
    int at = 0;
    for (int i = parts.first[b]; i < parts.first[b + 1]; ++i) {
      const int32_t* w = parts.item + kMlaWorkItemInts * i;
      EXPECT_EQ(w[0], b);
      EXPECT_EQ(w[1], at);
      check(b, i, w);
      at = w[2];
    }
    EXPECT_EQ(at, lens[b]) << "sequence " << b << " covered";
  }
}

// Segmented lists on the host mirror: each sequence's items cover it once, in order, cut only at
// tile edges; items run slot by slot (slot_first agrees with each item's slot); a slot holds at
// most its part of tiles and costs; at most slots + batch - 1 items.
TEST(GpuHost, MlaDecodePlanSegments) {
  EXPECT_EQ(mla_decode_segment_slots(132, 128, 1), 66);
  EXPECT_EQ(mla_decode_segment_slots(132, 128, 40), 66);
  EXPECT_EQ(mla_decode_segment_slots(132, 128, 67), 132);
  EXPECT_EQ(mla_decode_segment_slots(132, 64, 40), 132);
  EXPECT_EQ(mla_decode_segment_splits(1, 66), 66);
  EXPECT_EQ(mla_decode_segment_splits(40, 66), 3);   // 105 items at most
  EXPECT_EQ(mla_decode_segment_splits(200, 264), 3);
  // One 64K beside 39 of 1K: (1024 + 2) + 39 x (16 + 2) = 1728 tiles with costs, 27 a slot
  // (1728 tokens; one-item blocks take 2432-token chunks).
  std::vector<int32_t> near(40, 1024);
  near[0] = 65536;
  const std::vector<int32_t> list = mla_decode_plan_segments_host(near, 3, 66);
  EXPECT_EQ(list[0], 27 * 64);
  EXPECT_EQ(list[2], 66);
  EXPECT_ANY_THROW(mla_decode_plan_segments_host(near, 2, 66));  // 105 items need 3 splits
  EXPECT_ANY_THROW(mla_decode_plan_segments_host(std::vector<int32_t>{5, 0}, 2, 2));
  EXPECT_ANY_THROW(mla_decode_plan_segments_host(std::vector<int32_t>{5}, 1, 0));
  EXPECT_ANY_THROW(mla_decode_plan_segments_host(std::vector<int32_t>{5}, 1, 1, -1));
  EXPECT_ANY_THROW(mla_decode_plan_segments_host(std::vector<int32_t>{5}, 1, 1, 65));

  auto rng = test::make_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 60), slots = 1 + static_cast<int>(rng() % 300);
    const int splits = mla_decode_segment_splits(batch, slots) + static_cast<int>(rng() % 2);
    std::vector<int32_t> lens(batch);
    for (auto& len : lens) len = 1 + static_cast<int32_t>(rng() % (rng() % 4 == 0 ? 70000 : 2000));
    const int cost = static_cast<int>(rng() % 6);
    const std::vector<int32_t> l = mla_decode_plan_segments_host(lens, splits, slots, cost);
    const int items = batch * splits, used = l[1], part = l[0] / 64;
    ASSERT_EQ(l.size() * 4, mla_decode_work_list_bytes(batch, splits));
    EXPECT_EQ(l[2], slots);
    EXPECT_LE(used, slots + batch - 1);
    const ListParts parts = list_parts(l, batch, items);
    const auto [item, first, slot_first] = parts;
    EXPECT_EQ(first[0], 0);
    EXPECT_EQ(first[batch], used);
    std::vector<int64_t> load(static_cast<size_t>(slots), 0);  // tiles and costs a slot
    expect_sequences_covered(parts, lens, [&](int b, int i, const int32_t* w) {
      EXPECT_GT(w[2], w[1]);
      EXPECT_TRUE(w[2] % 64 == 0 || w[2] == lens[b]);
      ASSERT_GE(w[3], 0);  // (a failure ends this item's checks: w[3] indexes below)
      ASSERT_LT(w[3], slots);
      EXPECT_GE(i, slot_first[w[3]]);
      EXPECT_LT(i, slot_first[w[3] + 1]);
      load[w[3]] += (w[2] - w[1] + 63) / 64;
    });
    EXPECT_EQ(slot_first[0], 0);
    EXPECT_EQ(slot_first[slots], used);
    for (int k = 0; k < slots; ++k) {
      EXPECT_LE(slot_first[k], slot_first[k + 1]);
      EXPECT_LE(load[k], part) << "slot " << k;  // its tiles (a sequence's cost may precede)
    }
    for (int i = used; i < items; ++i) EXPECT_EQ(item[kMlaWorkItemInts * i], -1);
  }
}

// The work list's chunk and items, on the host mirror (the GPU tests compare the planner's bytes
// to it): chunks cover every sequence once, in order; the chunk is the smallest that fits.
TEST(GpuHost, MlaDecodePlan) {
  auto chunk_of = [](std::vector<int32_t> lens, int splits, int wave) {
    return mla_decode_plan_host(lens, splits, wave)[0];
  };
  EXPECT_EQ(mla_decode_wave_items(132, 128), 66);
  EXPECT_EQ(mla_decode_wave_items(132, 64), 132);
  EXPECT_EQ(mla_decode_plan_splits(132, 8, 128), 9);    // 72 items for a 66-item wave
  EXPECT_EQ(mla_decode_plan_splits(132, 1, 128), 66);
  EXPECT_EQ(mla_decode_plan_splits(132, 40, 128), 2);   // room to split a long one
  EXPECT_EQ(mla_decode_plan_splits(132, 200, 128), 2);  // 4 waves, 264 items
  // One 64K context beside seven of 1K, 64 items: 57 chunks of 1152 and one a short sequence
  // (uniform splits: 8 chunks of 8192 for the long one, the short ones' 7 left empty).
  std::vector<int32_t> mixed(8, 1024);
  mixed[0] = 65536;
  EXPECT_EQ(chunk_of(mixed, 8, 66), 1152);
  EXPECT_EQ(mla_decode_plan_host(mixed, 8, 66)[1], 64);
  EXPECT_EQ(chunk_of({8192}, 66, 66), 256);          // 128-token chunks would fill the wave
  EXPECT_EQ(chunk_of({1024}, 66, 66), 128);          // 8 items: 128 tokens suffice
  EXPECT_EQ(chunk_of({65536}, 66, 66), 1024);        // 64 items of 1024
  EXPECT_EQ(chunk_of({100, 3}, 1, 66), 128);         // a chunk a sequence, at least 128
  // A batch near a wave: one 64K beside 39 of 1K in 66 items (2 splits a sequence), not one
  // 64K item beside the others.
  std::vector<int32_t> near(40, 1024);
  near[0] = 65536;
  EXPECT_EQ(chunk_of(near, 2, 66), 2432);
  EXPECT_EQ(mla_decode_plan_host(near, 2, 66)[1], 66);
  EXPECT_EQ(chunk_of(std::vector<int32_t>(8, 8192), 8, 66), 1024);  // uniform: as the splits
  EXPECT_ANY_THROW(mla_decode_plan_host(std::vector<int32_t>{5, 0}, 2, 66));
  EXPECT_ANY_THROW(mla_decode_plan_host(std::vector<int32_t>{}, 2, 66));

  auto rng = test::make_rng();
  for (int trial = 0; trial < 300; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 40), splits = 1 + static_cast<int>(rng() % 70);
    const int wave = 1 + static_cast<int>(rng() % 140);
    std::vector<int32_t> lens(batch);
    for (auto& len : lens) len = 1 + static_cast<int32_t>(rng() % (rng() % 4 == 0 ? 70000 : 2000));
    const std::vector<int32_t> list = mla_decode_plan_host(lens, splits, wave);
    const int items = batch * splits, chunk = list[0], used = list[1];
    ASSERT_EQ(list.size() * 4, mla_decode_work_list_bytes(batch, splits));
    EXPECT_EQ(chunk % 64, 0);
    EXPECT_GE(chunk, 128);
    EXPECT_LE(used, items);
    const ListParts parts = list_parts(list, batch, items);
    const auto [item, first, slot_first] = parts;
    EXPECT_EQ(slot_first[0], 0);  // (a one-item list's: zero)
    EXPECT_EQ(first[0], 0);
    EXPECT_EQ(first[batch], used);
    expect_sequences_covered(parts, lens, [&](int b, int, const int32_t* w) {
      EXPECT_EQ(w[2], std::min(lens[b], w[1] + chunk));
    });
    for (int i = used; i < items; ++i) EXPECT_EQ(item[kMlaWorkItemInts * i], -1);
    // At most whole waves of items; the smallest chunk: 64 tokens less would not fit them (or
    // fall under the least chunk).
    const int target = std::min(items, (batch + wave - 1) / wave * wave);
    EXPECT_LE(used, target);
    int64_t n = 0;
    for (const int32_t len : lens) n += (len + chunk - 65) / (chunk - 64);
    if (chunk > 256) {
      EXPECT_GT(n, target);
    }
  }
  // Splits fitted to known lengths: the one-wave list's chunk and items, hardly a block unused.
  for (int trial = 0; trial < 200; ++trial) {
    const int batch = 1 + static_cast<int>(rng() % 40);
    std::vector<int32_t> lens(batch);
    for (auto& len : lens) len = 1 + static_cast<int32_t>(rng() % (rng() % 4 == 0 ? 70000 : 3000));
    const int wave_splits = mla_decode_plan_splits(132, batch, 128);
    const int fit = mla_decode_plan_splits(132, 128, lens);
    EXPECT_LE(fit, wave_splits);
    const std::vector<int32_t> wave_list = mla_decode_plan_host(lens, wave_splits, 66);
    const std::vector<int32_t> fit_list = mla_decode_plan_host(lens, fit, 66);
    EXPECT_EQ(fit_list[0], wave_list[0]) << "chunk";
    EXPECT_EQ(fit_list[1], wave_list[1]) << "items used";
    EXPECT_LT(batch * fit - fit_list[1], batch) << "unused items";
  }
  EXPECT_EQ(mla_decode_plan_splits(132, 128, std::vector<int32_t>{8192}), 32);
  EXPECT_EQ(mla_decode_plan_splits(132, 128, mixed), 8);
}

TEST(GpuHost, MlaSplitHeuristic) {
  EXPECT_EQ(mla_decode_splits(132, 1, 128, 100), 1);        // short: one chunk
  EXPECT_EQ(mla_decode_splits(132, 1, 128, 65536), 132);    // ~2 waves of 2 head groups
  EXPECT_EQ(mla_decode_splits(132, 64, 128, 65536), 2);     // the batch nearly fills the GPU
  EXPECT_EQ(mla_decode_splits(132, 1, 128, 1000), 8);       // chunks of >= 128 tokens
  EXPECT_GE(mla_decode_splits(132, 1, 16, 1 << 20), 100);
}

}  // namespace
}  // namespace hymoe::gpu
