// The layer path's small kernels against scalar references (double accumulation) on fresh random
// inputs with NaN-poisoned outputs; the attention on the tiny model's dims and on DeepSeek-V3's,
// over a shuffled paged cache with sequences of many lengths; rope against the formula of rope.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpu_test_util.h"
#include "hymoe/gpu/layer_kernels.h"

namespace hymoe::gpu {
namespace {

using test::make_rng;
using test::normalized_error;
using test::poisoned;
using test::random_bf16;
using test::random_f32;
using test::to_device;
using test::to_float;
using test::to_host;

TEST(LayerKernels, EmbedF32GathersRows) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  const int vocab = 97, dim = 72, tokens = 11;
  const auto table = random_bf16(static_cast<size_t>(vocab) * dim, rng);
  std::vector<int32_t> ids(tokens);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
  auto d_table = to_device(table, s);
  auto d_ids = to_device(ids, s);
  auto d_out = poisoned<float>(static_cast<size_t>(tokens) * dim, s);
  embed_f32({.ids = d_ids.as<int32_t>(), .table = d_table.as<Bf16>(), .out = d_out.as<float>(), .tokens = tokens, .dim = dim}, s);
  const auto out = to_host<float>(d_out, static_cast<size_t>(tokens) * dim, s);
  for (int t = 0; t < tokens; ++t)
    for (int c = 0; c < dim; ++c) ASSERT_EQ(out[t * dim + c], table[ids[t] * dim + c].to_float());
}

TEST(LayerKernels, RmsNormF32AndResidualAdd) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  for (const int cols : {256, 7168, 333}) {
    const int rows = 5;
    const auto x = random_f32(static_cast<size_t>(rows) * cols, rng, -3, 3);
    const auto w = random_f32(cols, rng, 0.5f, 1.5f);
    auto dx = to_device(x, s);
    auto dw = to_device(w, s);
    auto dout = poisoned<Bf16>(x.size(), s);
    auto dout32 = poisoned<float>(x.size(), s);
    rmsnorm_f32({.x = dx.as<float>(), .weight = dw.as<float>(), .out = dout.as<Bf16>(), .out_f32 = dout32.as<float>(),
                 .rows = rows, .cols = cols, .eps = 1e-6f},
                s);
    const auto out = to_float(to_host<Bf16>(dout, x.size(), s));
    const auto out32 = to_host<float>(dout32, x.size(), s);
    std::vector<double> ref(x.size());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
      const double inv = 1.0 / std::sqrt(ss / cols + 1e-6);
      for (int c = 0; c < cols; ++c) ref[r * cols + c] = x[r * cols + c] * inv * w[c];
    }
    EXPECT_LT(normalized_error(out, ref), 4e-3) << cols;
    EXPECT_LT(normalized_error(out32, ref), 1e-5) << cols;
    // Strided rows: the first cols - 7 columns of each row into rows of stride cols + 5, the
    // gaps keep their poison.
    const int part = cols - 7;
    auto dstrided = poisoned<Bf16>(static_cast<size_t>(rows) * (cols + 5), s);
    rmsnorm_f32({.x = dx.as<float>(), .weight = dw.as<float>(), .out = dstrided.as<Bf16>(), .rows = rows, .cols = part,
                 .eps = 1e-6f, .x_stride = cols, .out_stride = cols + 5},
                s);
    const auto strided = to_float(to_host<Bf16>(dstrided, static_cast<size_t>(rows) * (cols + 5), s));
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int c = 0; c < part; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
      const double inv = 1.0 / std::sqrt(ss / part + 1e-6);
      for (int c = 0; c < cols + 5; ++c) {
        const float got = strided[size_t(r) * (cols + 5) + c];
        if (c >= part) {
          ASSERT_TRUE(std::isnan(got)) << "column " << c << " past the row was written";
        } else {
          ASSERT_NEAR(got, x[r * cols + c] * inv * w[c], 1e-2 * std::fabs(x[r * cols + c] * inv * w[c]) + 1e-6);
        }
      }
    }

    // h += a + b (FP32).
    const auto a = random_f32(x.size(), rng, -1, 1);
    const auto b = random_f32(x.size(), rng, -1, 1);
    auto da = to_device(a, s);
    auto db = to_device(b, s);
    residual_add({.h = dx.as<float>(), .a = da.as<float>(), .b = db.as<float>(), .n = static_cast<int64_t>(x.size())}, s);
    const auto h = to_host<float>(dx, x.size(), s);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(h[i], x[i] + a[i] + b[i]);
  }
}

TEST(LayerKernels, SiluMulF32) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  const int rows = 4, cols = 1111;
  const int64_t in_stride = 2 * cols + 3, out_stride = cols + 9;
  const auto gu = random_f32(static_cast<size_t>(rows) * in_stride, rng, -4, 4);
  auto dgu = to_device(gu, s);
  auto dout = poisoned<Bf16>(static_cast<size_t>(rows) * out_stride, s);
  silu_mul_f32({.gate_up = dgu.as<float>(), .out = dout.as<Bf16>(), .rows = rows, .cols = cols, .in_stride = in_stride,
                .out_stride = out_stride},
               s);
  const auto out = to_float(to_host<Bf16>(dout, static_cast<size_t>(rows) * out_stride, s));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double g = gu[r * in_stride + c], u = gu[r * in_stride + cols + c];
      const double ref = g / (1 + std::exp(-g)) * u;
      ASSERT_NEAR(out[r * out_stride + c], ref, std::fabs(ref) / 128 + 1e-30) << r << "," << c;
    }
}

// rope.h's formula for pair i of a rope part at position pos, in double.
void rope_ref(const YarnTable& t, int pos, const float* in, double* out) {
  const int half = t.rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = double(static_cast<float>(pos) * t.inv_freq[i]);
    const double c = std::cos(angle) * t.mscale, sn = std::sin(angle) * t.mscale;
    out[i] = in[2 * i] * c - in[2 * i + 1] * sn;
    out[i + half] = in[2 * i + 1] * c + in[2 * i] * sn;
  }
}

TEST(LayerKernels, DenseGemvF32MatchesReferenceAndIsBatchInvariant) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  for (const auto& [n, k] : {std::pair{256, 7168}, std::pair{1001, 264}, std::pair{16, 8}}) {
    const auto w = random_bf16(static_cast<size_t>(n) * k, rng);
    const auto x = random_f32(static_cast<size_t>(kDenseGemvMaxTokens) * k, rng, -1, 1);
    auto dw = to_device(w, s);
    auto dx = to_device(x, s);
    std::vector<float> one_token;
    for (const int tokens : {1, 3, 8}) {
      const int64_t ldy = n + 3;
      auto dy = poisoned<float>(static_cast<size_t>(tokens) * ldy, s);
      dense_gemv_f32({.w = dw.as<Bf16>(), .x = dx.as<float>(), .y = dy.as<float>(), .tokens = tokens, .n = n, .k = k, .ldy = ldy}, s);
      const auto y = to_host<float>(dy, static_cast<size_t>(tokens) * ldy, s);
      std::vector<float> got;
      std::vector<double> ref;
      for (int t = 0; t < tokens; ++t) {
        for (int r = 0; r < n; ++r) {
          double acc = 0;
          for (int c = 0; c < k; ++c) acc += double(w[size_t(r) * k + c].to_float()) * x[size_t(t) * k + c];
          ref.push_back(acc);
          got.push_back(y[t * ldy + r]);
        }
      }
      EXPECT_LT(normalized_error(got, ref), 1e-5) << n << "x" << k << " tokens " << tokens;
      // Token 0's row is the same bits whatever the batch.
      if (tokens == 1) one_token.assign(got.begin(), got.begin() + n);
      for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], one_token[r]) << "row " << r << " at batch " << tokens;
    }
  }
}

TEST(LayerKernels, DenseGemmF32MatchesReferenceAndIsBatchInvariant) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  for (const auto& [n, k] : {std::pair{256, 7168}, std::pair{101, 200}, std::pair{7, 33}}) {
    const int max_tokens = 150;
    const auto w = random_bf16(static_cast<size_t>(n) * k, rng);
    const auto x = random_f32(static_cast<size_t>(max_tokens) * k, rng, -1, 1);
    auto dw = to_device(w, s);
    auto dx = to_device(x, s);
    std::vector<float> first;
    for (const int tokens : {1, 65, max_tokens}) {
      const int64_t ldy = n + 5;
      auto dy = poisoned<float>(static_cast<size_t>(tokens) * ldy, s);
      dense_gemm_f32({.w = dw.as<Bf16>(), .x = dx.as<float>(), .y = dy.as<float>(), .tokens = tokens, .n = n, .k = k,
                      .ldy = ldy},
                     s);
      const auto y = to_host<float>(dy, static_cast<size_t>(tokens) * ldy, s);
      std::vector<float> got;
      std::vector<double> ref;
      for (int t = 0; t < tokens; ++t) {
        for (int r = 0; r < n; ++r) {
          double acc = 0;
          for (int c = 0; c < k; ++c) acc += double(w[size_t(r) * k + c].to_float()) * x[size_t(t) * k + c];
          ref.push_back(acc);
          got.push_back(y[t * ldy + r]);
        }
        for (int64_t r = n; r < ldy; ++r) ASSERT_TRUE(std::isnan(y[t * ldy + r])) << "padding written";
      }
      EXPECT_LT(normalized_error(got, ref), 1e-5) << n << "x" << k << " tokens " << tokens;
      // Token 0's row is the same bits whatever the batch.
      if (tokens == 1) first.assign(got.begin(), got.begin() + n);
      for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], first[r]) << "row " << r << " at batch " << tokens;
    }
  }
}

// A paged latent cache of random rows, sequences of the given lengths on shuffled blocks.
struct PagedCache {
  int width, block_tokens, max_blocks;
  std::vector<Bf16> rows;         // [blocks * block_tokens, width]
  std::vector<std::vector<int32_t>> tables;
};

PagedCache make_cache(const std::vector<int>& lens, int width, int block_tokens, std::mt19937_64& rng) {
  PagedCache pc{width, block_tokens, 0, {}, {}};
  int total = 0;
  for (int len : lens) {
    const int nb = (len + block_tokens - 1) / block_tokens;
    pc.max_blocks = std::max(pc.max_blocks, nb);
    total += nb;
  }
  std::vector<int32_t> ids(total + 3);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  pc.rows = random_bf16(static_cast<size_t>(ids.size()) * block_tokens * width, rng);
  size_t next = 0;
  for (int len : lens) {
    std::vector<int32_t> t((len + block_tokens - 1) / block_tokens);
    for (auto& b : t) b = ids[next++];
    pc.tables.push_back(t);
  }
  return pc;
}

struct AttnDims {
  int heads, lora, rope, block_tokens;
};

class MlaAnyTest : public ::testing::TestWithParam<AttnDims> {};

TEST_P(MlaAnyTest, AbsorbAttendUnabsorbMatchReference) {
  HYMOE_REQUIRE_GPU();
  const AttnDims d = GetParam();
  auto rng = make_rng();
  Stream s;
  const int nope = 64, vd = 48, width = d.lora + d.rope;
  const std::vector<int> lens = {1, 7, 64, 65, 200, 3};  // per query token
  const int T = static_cast<int>(lens.size());
  const PagedCache pc = make_cache(lens, width, d.block_tokens, rng);
  const YarnTable yarn = make_yarn_table(YarnConfig{}, d.rope);
  std::vector<int32_t> positions(T);
  for (int t = 0; t < T; ++t) positions[t] = lens[t] - 1 + 1000 * t;  // far positions: large angles
  // Absorption: q [T, heads, nope + rope] through W_UK [heads, nope, lora], q_pe roped.
  const auto q = random_f32(static_cast<size_t>(T) * d.heads * (nope + d.rope), rng, -1, 1);
  const auto w_uk = random_bf16(static_cast<size_t>(d.heads) * nope * d.lora, rng, 0.1f);
  auto dq = to_device(q, s);
  auto dwuk = to_device(w_uk, s);
  auto dpos = to_device(positions, s);
  auto dqa = poisoned<float>(static_cast<size_t>(T) * d.heads * width, s);
  mla_absorb_q({.q = dq.as<float>(), .w_uk = dwuk.as<Bf16>(), .positions = dpos.as<int32_t>(), .out = dqa.as<float>(),
                .table = yarn, .tokens = T, .heads = d.heads, .nope = nope, .rope = d.rope, .lora = d.lora},
               s);
  const auto qa = to_host<float>(dqa, static_cast<size_t>(T) * d.heads * width, s);
  {
    std::vector<double> ref;
    std::vector<double> roped(d.rope);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < d.heads; ++h) {
        const float* qr = &q[(size_t(t) * d.heads + h) * (nope + d.rope)];
        for (int c = 0; c < d.lora; ++c) {
          double acc = 0;
          for (int r = 0; r < nope; ++r) acc += double(qr[r]) * w_uk[(size_t(h) * nope + r) * d.lora + c].to_float();
          ref.push_back(acc);
        }
        rope_ref(yarn, positions[t], qr + nope, roped.data());
        ref.insert(ref.end(), roped.begin(), roped.end());
      }
    EXPECT_LT(normalized_error(qa, ref), 1e-5);
  }
  // Attention over the paged cache from the absorbed q.
  std::vector<int32_t> table(static_cast<size_t>(T) * pc.max_blocks, -1);
  for (int t = 0; t < T; ++t) std::copy(pc.tables[t].begin(), pc.tables[t].end(), table.begin() + size_t(t) * pc.max_blocks);
  auto dcache = to_device(pc.rows, s);
  auto dtable = to_device(table, s);
  auto dlens = to_device(lens, s);
  auto dol = poisoned<float>(static_cast<size_t>(T) * d.heads * d.lora, s);
  const float scale = 1.0f / std::sqrt(static_cast<float>(nope + d.rope));
  mla_attention_any({.q = dqa.as<float>(), .cache = dcache.as<Bf16>(), .block_table = dtable.as<int32_t>(),
                     .seq_lens = dlens.as<int32_t>(), .out = dol.as<float>(), .tokens = T, .heads = d.heads,
                     .lora = d.lora, .rope = d.rope, .block_tokens = d.block_tokens, .max_blocks = pc.max_blocks,
                     .scale = scale},
                    s);
  const auto ol = to_host<float>(dol, static_cast<size_t>(T) * d.heads * d.lora, s);
  {
    std::vector<double> ref;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < d.heads; ++h) {
        const float* qr = &qa[(size_t(t) * d.heads + h) * width];
        std::vector<double> sc(lens[t]);
        double mx = -1e300;
        for (int p = 0; p < lens[t]; ++p) {
          const Bf16* row = &pc.rows[(size_t(pc.tables[t][p / d.block_tokens]) * d.block_tokens + p % d.block_tokens) * width];
          double dot = 0;
          for (int c = 0; c < width; ++c) dot += double(qr[c]) * row[c].to_float();
          sc[p] = dot * scale;
          mx = std::max(mx, sc[p]);
        }
        double sum = 0;
        for (auto& v : sc) sum += (v = std::exp(v - mx));
        for (int c = 0; c < d.lora; ++c) {
          double acc = 0;
          for (int p = 0; p < lens[t]; ++p)
            acc += sc[p] * pc.rows[(size_t(pc.tables[t][p / d.block_tokens]) * d.block_tokens + p % d.block_tokens) * width + c].to_float();
          ref.push_back(acc / sum);
        }
      }
    EXPECT_LT(normalized_error(ol, ref), 1e-4);
  }
  // Through W_UV.
  const auto w_uv_t = random_bf16(static_cast<size_t>(d.heads) * d.lora * vd, rng, 0.1f);
  auto dwuv = to_device(w_uv_t, s);
  auto dout = poisoned<Bf16>(static_cast<size_t>(T) * d.heads * vd, s);
  mla_unabsorb({.o_lat = dol.as<float>(), .w_uv_t = dwuv.as<Bf16>(), .out = dout.as<Bf16>(), .tokens = T, .heads = d.heads,
                .lora = d.lora, .v_dim = vd},
               s);
  const auto out = to_float(to_host<Bf16>(dout, static_cast<size_t>(T) * d.heads * vd, s));
  std::vector<double> ref;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < d.heads; ++h)
      for (int v = 0; v < vd; ++v) {
        double acc = 0;
        for (int c = 0; c < d.lora; ++c)
          acc += double(ol[(size_t(t) * d.heads + h) * d.lora + c]) * w_uv_t[(size_t(h) * d.lora + c) * vd + v].to_float();
        ref.push_back(acc);
      }
  EXPECT_LT(normalized_error(out, ref), 5e-3);
}

INSTANTIATE_TEST_SUITE_P(Dims, MlaAnyTest,
                         ::testing::Values(AttnDims{4, 256, 32, 16}, AttnDims{16, 512, 64, 64}, AttnDims{3, 100, 12, 5}));

TEST(LayerKernels, MlaLatentRowsNormRopeAndScatter) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  const int lora = 264, rope = 32, width = lora + rope, tokens = 9, slots_total = 40;
  const int64_t stride = width + 16;
  const YarnTable yarn = make_yarn_table(YarnConfig{}, rope);
  const auto kva = random_f32(static_cast<size_t>(tokens) * stride, rng, -2, 2);
  const auto w = random_f32(lora, rng, 0.5f, 1.5f);
  std::vector<int32_t> slots(slots_total);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(tokens);
  std::vector<int32_t> positions(tokens);
  for (int t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>(rng() % 100000);
  auto dkva = to_device(kva, s);
  auto dw = to_device(w, s);
  auto dslots = to_device(slots, s);
  auto dpos = to_device(positions, s);
  auto dcache = poisoned<Bf16>(static_cast<size_t>(slots_total) * width, s);
  mla_latent_rows({.kva = dkva.as<float>(), .norm_weight = dw.as<float>(), .positions = dpos.as<int32_t>(),
                   .slots = dslots.as<int32_t>(), .cache = dcache.as<Bf16>(), .table = yarn, .tokens = tokens,
                   .lora = lora, .rope = rope, .kva_stride = stride, .eps = 1e-6f},
                  s);
  const auto cache = to_float(to_host<Bf16>(dcache, static_cast<size_t>(slots_total) * width, s));
  std::vector<double> roped(rope);
  for (int t = 0; t < tokens; ++t) {
    const float* x = &kva[size_t(t) * stride];
    double ss = 0;
    for (int c = 0; c < lora; ++c) ss += double(x[c]) * x[c];
    const double inv = 1.0 / std::sqrt(ss / lora + 1e-6);
    rope_ref(yarn, positions[t], x + lora, roped.data());
    const float* row = &cache[size_t(slots[t]) * width];
    for (int c = 0; c < width; ++c) {
      const double ref = c < lora ? x[c] * inv * w[c] : roped[c - lora];
      ASSERT_NEAR(row[c], ref, std::fabs(ref) / 128 + 1e-4) << "token " << t << " column " << c;
    }
  }
  // Slots no token names keep their poison.
  std::vector<bool> used(slots_total);
  for (int sl : slots) used[sl] = true;
  for (int sl = 0; sl < slots_total; ++sl) {
    if (!used[sl]) {
      ASSERT_TRUE(std::isnan(cache[size_t(sl) * width])) << "slot " << sl;
    }
  }
}

TEST(LayerKernels, WidenBf16WithStrides) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  const int rows = 7, cols = 333;
  const int64_t x_stride = 352, out_stride = 340;
  const auto x = random_bf16(static_cast<size_t>(rows) * x_stride, rng);
  auto dx = to_device(x, s);
  auto dout = poisoned<float>(static_cast<size_t>(rows) * out_stride, s);
  widen_bf16({.x = dx.as<Bf16>(), .out = dout.as<float>(), .rows = rows, .cols = cols, .x_stride = x_stride,
              .out_stride = out_stride},
             s);
  const auto out = to_host<float>(dout, static_cast<size_t>(rows) * out_stride, s);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < out_stride; ++c) {
      const float v = out[size_t(r) * out_stride + c];
      if (c < cols) {
        ASSERT_EQ(v, x[size_t(r) * x_stride + c].to_float()) << r << "," << c;
      } else {
        ASSERT_TRUE(std::isnan(v)) << "padding " << r << "," << c << " written";
      }
    }
  }
}

TEST(LayerKernels, MlaGatherLatentFollowsTheBlockTable) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  const int width = 576, block_tokens = 16, blocks = 9;
  for (const int tokens : {1, 16, 37, 9 * 16}) {
    const auto cache = random_bf16(static_cast<size_t>(blocks) * block_tokens * width, rng);
    std::vector<int32_t> table(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    auto dcache = to_device(cache, s);
    auto dtable = to_device(table, s);
    auto dout = poisoned<Bf16>(static_cast<size_t>(tokens + 1) * width, s);
    mla_gather_latent({.cache = dcache.as<Bf16>(), .block_table = dtable.as<int32_t>(), .out = dout.as<Bf16>(),
                       .tokens = tokens, .width = width, .block_tokens = block_tokens},
                      s);
    const auto out = to_float(to_host<Bf16>(dout, static_cast<size_t>(tokens + 1) * width, s));
    for (int t = 0; t < tokens; ++t) {
      const size_t row = size_t(table[t / block_tokens]) * block_tokens + t % block_tokens;
      for (int c = 0; c < width; ++c)
        ASSERT_EQ(out[size_t(t) * width + c], cache[row * width + c].to_float()) << "token " << t << " column " << c;
    }
    for (int c = 0; c < width; ++c) ASSERT_TRUE(std::isnan(out[size_t(tokens) * width + c])) << "row past the end written";
  }
}

TEST(LayerKernels, MlaAssembleKvInterleavesTheRopeKeyIntoEveryHead) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  const int heads = 3, nope = 16, rope = 8, vdim = 24, lora = 32, latent_stride = lora + rope + 8;
  const int kvw = nope + vdim, ow = nope + rope + vdim;
  for (const int tokens : {1, 7, 130}) {
    const auto kvb = random_bf16(static_cast<size_t>(tokens) * heads * kvw, rng);
    const auto latent = random_bf16(static_cast<size_t>(tokens) * latent_stride, rng);
    auto dkvb = to_device(kvb, s);
    auto dlatent = to_device(latent, s);
    const size_t out_n = static_cast<size_t>(tokens + 1) * heads * ow;
    auto dout = poisoned<Bf16>(out_n, s);
    mla_assemble_kv({.kvb = dkvb.as<Bf16>(), .latent = dlatent.as<Bf16>(), .out = dout.as<Bf16>(), .tokens = tokens,
                     .heads = heads, .nope = nope, .rope = rope, .vdim = vdim, .lora = lora,
                     .latent_stride = latent_stride},
                    s);
    const auto out = to_float(to_host<Bf16>(dout, out_n, s));
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < heads; ++h) {
        for (int c = 0; c < ow; ++c) {
          const size_t src_kv = (size_t(t) * heads + h) * kvw;
          const float want = c < nope          ? kvb[src_kv + c].to_float()
                             : c < nope + rope ? latent[size_t(t) * latent_stride + lora + (c - nope)].to_float()
                                               : kvb[src_kv + nope + (c - nope - rope)].to_float();
          ASSERT_EQ(out[(size_t(t) * heads + h) * ow + c], want) << "token " << t << " head " << h << " column " << c;
        }
      }
    }
    for (int c = 0; c < heads * ow; ++c)
      ASSERT_TRUE(std::isnan(out[size_t(tokens) * heads * ow + c])) << "row past the end written";
  }
  EXPECT_THROW(mla_assemble_kv({.tokens = 1, .heads = 1, .nope = 12, .rope = 8, .vdim = 8}, nullptr), Error);
}

TEST(LayerKernels, MoeGemvMatchesReferenceAndIsBatchInvariant) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream s;
  const int E = 6, hidden = 272, inter = 144, top_k = 2, tokens = 3;  // neither a multiple of 128
  const int hb = (hidden + 127) / 128, ib = (inter + 127) / 128;
  std::vector<std::vector<Fp8E4M3>> gw, uw, dw;
  std::vector<std::vector<float>> gs, us, ds;
  std::vector<DeviceBuffer> keep;
  std::vector<ExpertWeight> g(E), u(E), d(E);
  for (int e = 0; e < E; ++e) {
    gw.push_back(test::random_fp8(size_t(inter) * hidden, rng));
    uw.push_back(test::random_fp8(size_t(inter) * hidden, rng));
    dw.push_back(test::random_fp8(size_t(hidden) * inter, rng));
    gs.push_back(random_f32(size_t(ib) * hb, rng, 1e-3f, 4e-3f));
    us.push_back(random_f32(size_t(ib) * hb, rng, 1e-3f, 4e-3f));
    ds.push_back(random_f32(size_t(hb) * ib, rng, 1e-3f, 4e-3f));
    for (auto* v : {&gw.back(), &uw.back(), &dw.back()}) keep.push_back(to_device(*v, s));
    for (auto* v : {&gs.back(), &us.back(), &ds.back()}) keep.push_back(to_device(*v, s));
    const size_t k = keep.size();
    g[e] = {keep[k - 6].as<Fp8E4M3>(), keep[k - 3].as<float>()};
    u[e] = {keep[k - 5].as<Fp8E4M3>(), keep[k - 2].as<float>()};
    d[e] = {keep[k - 4].as<Fp8E4M3>(), keep[k - 1].as<float>()};
  }
  auto dg = to_device(g, s), du = to_device(u, s), dd = to_device(d, s);
  const auto x = random_bf16(size_t(tokens) * hidden, rng);
  std::vector<int32_t> ids(tokens * top_k);
  std::vector<float> wts(tokens * top_k);
  for (int t = 0; t < tokens; ++t) {
    ids[t * top_k] = static_cast<int32_t>(rng() % E);
    ids[t * top_k + 1] = (ids[t * top_k] + 1 + static_cast<int32_t>(rng() % (E - 1))) % E;
    wts[t * top_k] = 0.7f;
    wts[t * top_k + 1] = 0.45f;
  }
  auto dx = to_device(x, s), dids = to_device(ids, s), dw_ = to_device(wts, s);
  auto run = [&](int n) {
    auto act = poisoned<Bf16>(size_t(n) * top_k * inter, s);
    auto out = poisoned<float>(size_t(n) * hidden, s);
    moe_gemv({.gate = dg.as<ExpertWeight>(), .up = du.as<ExpertWeight>(), .down = dd.as<ExpertWeight>(), .topk_ids = dids.as<int32_t>(),
              .topk_weights = dw_.as<float>(), .x = dx.as<Bf16>(), .act = act.as<Bf16>(), .out = out.as<float>(), .tokens = n,
              .top_k = top_k, .experts = E, .hidden = hidden, .inter = inter, .gate_scale_ld = hb,
              .down_scale_ld = ib},
             s);
    return to_host<float>(out, size_t(n) * hidden, s);
  };
  const auto out = run(tokens);
  std::vector<double> ref;
  for (int t = 0; t < tokens; ++t) {
    std::vector<double> o(hidden, 0.0);
    for (int k = 0; k < top_k; ++k) {
      const int e = ids[t * top_k + k];
      std::vector<double> act(inter);
      for (int r = 0; r < inter; ++r) {
        double gv = 0, uv = 0;
        for (int c = 0; c < hidden; ++c) {
          const double xv = x[size_t(t) * hidden + c].to_float();
          gv += double(gw[e][size_t(r) * hidden + c].to_float()) * gs[e][(r / 128) * hb + c / 128] * xv;
          uv += double(uw[e][size_t(r) * hidden + c].to_float()) * us[e][(r / 128) * hb + c / 128] * xv;
        }
        act[r] = bf16_to_float(float_to_bf16(static_cast<float>(gv / (1 + std::exp(-gv)) * uv)));
      }
      for (int r = 0; r < hidden; ++r) {
        double acc = 0;
        for (int c = 0; c < inter; ++c) acc += double(dw[e][size_t(r) * inter + c].to_float()) * ds[e][(r / 128) * ib + c / 128] * act[c];
        o[r] += wts[t * top_k + k] * acc;
      }
    }
    ref.insert(ref.end(), o.begin(), o.end());
  }
  EXPECT_LT(normalized_error(out, ref), 5e-3);
  const auto one = run(1);
  for (int r = 0; r < hidden; ++r) ASSERT_EQ(one[r], out[r]) << "row " << r;
}

TEST(LayerKernels, ShapesAreChecked) {
  EXPECT_THROW(dense_gemv_f32({.tokens = 9, .n = 4, .k = 8, .ldy = 4}, nullptr), Error);
  EXPECT_THROW(dense_gemv_f32({.tokens = 1, .n = 4, .k = 12, .ldy = 4}, nullptr), Error);
  EXPECT_THROW(mla_absorb_q({.tokens = 1, .heads = 1, .nope = 8, .rope = 64, .lora = 8}, nullptr), Error);  // no table
  EXPECT_THROW(silu_mul_f32({.rows = 1, .cols = 8, .in_stride = 8, .out_stride = 8}, nullptr), Error);
  EXPECT_THROW(mla_attention_any({.tokens = 1, .heads = 1, .lora = 2048, .rope = 0, .block_tokens = 1, .max_blocks = 1}, nullptr),
               Error);
  EXPECT_THROW(moe_gemv({.tokens = 1, .top_k = 2, .experts = 4, .hidden = 100, .inter = 64}, nullptr), Error);
  EXPECT_THROW(moe_gemv({.tokens = 1, .top_k = 2, .experts = 4, .hidden = 256, .inter = 64, .gate_scale_ld = 1,
                         .down_scale_ld = 1}, nullptr),
               Error);  // gate scales need 2 a row
  EXPECT_THROW(widen_bf16({.rows = 1, .cols = 8, .x_stride = 4}, nullptr), Error);
  EXPECT_THROW(mla_gather_latent({.tokens = 1, .width = 12, .block_tokens = 4}, nullptr), Error);  // width % 8
}

}  // namespace
}  // namespace hymoe::gpu
