#include "hymoe/kernels/mla_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

using test::nan_vector;
using test::random_bf16;
using test::random_f32;

constexpr Isa kVariants[] = {Isa::kScalar, Isa::kAvx512, Isa::kAvx512Bf16};

// A sequence's paged latent cache (pages in shuffled order, each page_tokens rows), its queries
// [tokens][heads] with padded strides, and an output buffer of the same shape (padded too).
struct Case {
  int64_t lora = 0, rope = 0, heads = 0, tokens = 0, first_position = 0, page_tokens = 0;
  std::vector<uint16_t> pool;
  std::vector<const uint16_t*> pages;
  std::vector<float> q_lat, q_pe;
  int64_t q_lat_head = 0, q_pe_head = 0, out_head = 0;

  Case(int64_t lora_, int64_t rope_, int64_t heads_, int64_t tokens_, int64_t first, int64_t page, std::mt19937_64& rng,
       float q_range)
      : lora(lora_), rope(rope_), heads(heads_), tokens(tokens_), first_position(first), page_tokens(page) {
    const int64_t width = lora + rope, n_pages = (first + tokens + page - 1) / page;
    pool = random_bf16(static_cast<size_t>(n_pages * page * width), rng, 1.0f);
    std::vector<int64_t> order(static_cast<size_t>(n_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i : order) pages.push_back(pool.data() + i * page * width);
    q_lat_head = lora + 16;  // padded strides: a stray read or write shows
    q_pe_head = rope + 8;
    out_head = lora + 32;
    q_lat = random_f32(static_cast<size_t>(tokens * heads * q_lat_head), rng, -q_range, q_range);
    q_pe = random_f32(static_cast<size_t>(tokens * heads * q_pe_head), rng, -q_range, q_range);
  }
  size_t out_size() const { return static_cast<size_t>(tokens * heads * out_head); }
  MlaAttentionParams params(float* out) const {
    MlaAttentionParams p;
    p.lora = lora;
    p.rope = rope;
    p.first_position = first_position;
    p.token_begin = 0;
    p.token_end = tokens;
    p.head_begin = 0;
    p.head_end = heads;
    p.q_lat = q_lat.data();
    p.q_lat_token_stride = heads * q_lat_head;
    p.q_lat_head_stride = q_lat_head;
    p.q_pe = q_pe.data();
    p.q_pe_token_stride = heads * q_pe_head;
    p.q_pe_head_stride = q_pe_head;
    p.pages = pages.data();
    p.page_tokens = page_tokens;
    p.scale = 1.0f / std::sqrt(192.0f);
    p.out = out;
    p.out_token_stride = heads * out_head;
    p.out_head_stride = out_head;
    return p;
  }
};

bool skip(Isa isa) {
  if (isa_supported(isa)) return false;
  std::printf("mla_attention: variant %s skipped (this CPU lacks it)\n", std::string(isa_name(isa)).c_str());
  return true;
}

// Checks one call's output against the reference: every output of the call's rows within the
// bound, everything else (other rows, row padding) still NaN.
void expect_matches(const Case& cs, const MlaAttentionParams& p, const std::vector<float>& out,
                    const std::vector<float>& ref, const std::vector<float>& err_scale, const char* what) {
  for (int64_t t = 0; t < cs.tokens; ++t) {
    for (int64_t h = 0; h < cs.heads; ++h) {
      const bool inside = t >= p.token_begin && t < p.token_end && h >= p.head_begin && h < p.head_end;
      const size_t base = static_cast<size_t>((t * cs.heads + h) * cs.out_head);
      for (int64_t c = 0; c < cs.out_head; ++c) {
        const float v = out[base + static_cast<size_t>(c)];
        if (!inside || c >= cs.lora) {
          ASSERT_TRUE(std::isnan(v)) << what << " wrote outside its rows: token " << t << " head " << h << " col " << c;
          continue;
        }
        // BF16 weights p (8 significant bits, RNE): at most 2^-8 of sum p|v| / sum p; FP32 scores and
        // sums: 1e-4 of |v| <= 1.
        const double bound = std::ldexp(1.0, -8) * 1.01 * err_scale[base + static_cast<size_t>(c)] + 1e-4;
        ASSERT_LE(std::fabs(double(v) - ref[base + static_cast<size_t>(c)]), bound)
            << what << " token " << t << " (position " << cs.first_position + t << ") head " << h << " col " << c
            << ": " << v << " vs " << ref[base + static_cast<size_t>(c)];
      }
    }
  }
}

// Every variant against the double reference on fresh random shapes: 1..70 query tokens (causal
// inside the block), contexts not multiples of the key block, pages of 16..100 tokens (page and
// key block boundaries apart), sub-ranges of tokens and heads, flat and peaked softmax.
TEST(MlaAttention, EveryVariantMatchesReference) {
  std::mt19937_64 rng = test::make_rng();
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t lora = iter % 4 == 0 ? 512 : 64 * (1 + static_cast<int64_t>(rng() % 6));
    const int64_t rope = iter % 4 == 0 ? 64 : 32 * (1 + static_cast<int64_t>(rng() % 2));
    const int64_t heads = 1 + static_cast<int64_t>(rng() % 9);
    const int64_t tokens = iter % 3 == 0 ? 1 : 1 + static_cast<int64_t>(rng() % 70);
    const int64_t first = iter % 5 == 0 ? 0 : static_cast<int64_t>(rng() % 300);
    const int64_t pages[] = {16, 48, 64, 100};
    const float q_range = iter % 2 ? 0.5f : 4.0f;
    Case cs(lora, rope, heads, tokens, first, pages[rng() % 4], rng, q_range);
    std::vector<float> ref = nan_vector(cs.out_size()), err = nan_vector(cs.out_size());
    MlaAttentionParams p = cs.params(ref.data());
    p.token_begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(tokens));
    p.token_end = p.token_begin + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(tokens - p.token_begin));
    p.head_begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(heads));
    p.head_end = p.head_begin + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(heads - p.head_begin));
    mla_attention_reference(p, err.data());
    for (Isa isa : kVariants) {
      if (skip(isa)) continue;
      std::vector<float> out = nan_vector(cs.out_size());
      p.out = out.data();
      validate(p);
      MlaAttentionScratch scratch;
      mla_attention(isa, p, scratch);
      SCOPED_TRACE(::testing::Message() << isa_name(isa) << " lora " << lora << " rope " << rope << " heads [" << p.head_begin
                                        << ", " << p.head_end << ") tokens [" << p.token_begin << ", " << p.token_end
                                        << ") first " << first << " page " << cs.page_tokens);
      expect_matches(cs, p, out, ref, err, std::string(isa_name(isa)).c_str());
    }
  }
}

// The real DeepSeek-V3 widths, a long context crossing many key blocks and pages: one decode
// query of 16 heads at position 1000, and a chunk of 9 queries ending there.
TEST(MlaAttention, LongContextAtModelWidths) {
  std::mt19937_64 rng = test::make_rng();
  for (const int64_t tokens : {1, 9}) {
    Case cs(512, 64, 16, tokens, 1001 - tokens, 64, rng, 2.0f);
    std::vector<float> ref = nan_vector(cs.out_size()), err = nan_vector(cs.out_size());
    MlaAttentionParams p = cs.params(ref.data());
    mla_attention_reference(p, err.data());
    for (Isa isa : kVariants) {
      if (skip(isa)) continue;
      std::vector<float> out = nan_vector(cs.out_size());
      p.out = out.data();
      MlaAttentionScratch scratch;
      mla_attention(isa, p, scratch);
      expect_matches(cs, p, out, ref, err, std::string(isa_name(isa)).c_str());
    }
  }
}

// A token's output is bitwise the same whether its prompt is processed in chunks of 1, 7 or 64
// queries, and whatever heads share its call (per variant; one scratch reused across calls).
TEST(MlaAttention, ChunkingDoesNotChangeBits) {
  std::mt19937_64 rng = test::make_rng();
  const int64_t first = 5 + static_cast<int64_t>(rng() % 60), tokens = 150;
  Case cs(512, 64, 6, tokens, first, 48, rng, 2.0f);
  for (Isa isa : kVariants) {
    if (skip(isa)) continue;
    std::vector<std::vector<float>> outs;
    for (const int64_t chunk : {1, 7, 64}) {
      std::vector<float> out = nan_vector(cs.out_size());
      MlaAttentionScratch scratch;
      for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
        // The chunk as the executor would see it: queries from index 0 at its own first position.
        const int64_t n = std::min(chunk, tokens - t0);
        MlaAttentionParams p = cs.params(out.data());
        p.first_position = first + t0;
        p.token_end = n;
        p.q_lat += t0 * p.q_lat_token_stride;
        p.q_pe += t0 * p.q_pe_token_stride;
        p.out += t0 * p.out_token_stride;
        // Heads split differently per chunk size: [0, split) and [split, heads).
        const int64_t split = chunk == 7 ? 2 : chunk == 64 ? 5 : cs.heads;
        p.head_end = split;
        mla_attention(isa, p, scratch);
        if (split < cs.heads) {
          p.head_begin = split;
          p.head_end = cs.heads;
          mla_attention(isa, p, scratch);
        }
      }
      outs.push_back(std::move(out));
    }
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t h = 0; h < cs.heads; ++h) {
        const size_t base = static_cast<size_t>((t * cs.heads + h) * cs.out_head);
        const size_t bytes = static_cast<size_t>(cs.lora) * sizeof(float);
        ASSERT_FALSE(std::isnan(outs[0][base])) << isa_name(isa);
        ASSERT_EQ(std::memcmp(&outs[0][base], &outs[1][base], bytes), 0)
            << isa_name(isa) << " chunks of 1 vs 7: token " << t << " head " << h;
        ASSERT_EQ(std::memcmp(&outs[0][base], &outs[2][base], bytes), 0)
            << isa_name(isa) << " chunks of 1 vs 64: token " << t << " head " << h;
      }
    }
  }
}

// The absorption products on every variant against the double reference: 1..11 tokens (tiles of
// 4, 2, 1), widths of 16..640 columns (tiles of 256/128/64/16), strided rows with NaN padding.
// FP32 accumulation of k products: each output within 1e-5 of the sum of its products' magnitudes.
TEST(MlaAbsorb, EveryVariantMatchesReference) {
  std::mt19937_64 rng = test::make_rng();
  const Isa variants[] = {Isa::kScalar, Isa::kAvx512};
  for (int iter = 0; iter < 40; ++iter) {
    MlaAbsorbParams p;
    p.k = 1 + static_cast<int64_t>(rng() % 600);
    p.n = 16 * (1 + static_cast<int64_t>(rng() % 40));
    p.tokens = 1 + static_cast<int64_t>(rng() % 11);
    p.x_stride = p.k + static_cast<int64_t>(rng() % 5);
    p.y_stride = p.n + 16;
    const auto w = random_bf16(static_cast<size_t>(p.k * p.n), rng);
    const auto x = random_f32(static_cast<size_t>(p.tokens * p.x_stride), rng);
    p.w = w.data();
    p.x = x.data();
    auto ref = nan_vector(static_cast<size_t>(p.tokens * p.y_stride));
    p.y = ref.data();
    mla_absorb_reference(p);
    for (Isa isa : variants) {
      if (skip(isa)) continue;
      auto y = nan_vector(ref.size());
      p.y = y.data();
      validate(p);
      mla_absorb(isa, p);
      for (int64_t t = 0; t < p.tokens; ++t) {
        for (int64_t c = 0; c < p.y_stride; ++c) {
          const size_t at = static_cast<size_t>(t * p.y_stride + c);
          if (c >= p.n) {
            ASSERT_TRUE(std::isnan(y[at])) << isa_name(isa) << " wrote padding: token " << t << " col " << c;
            continue;
          }
          double magnitude = 0.0;
          for (int64_t i = 0; i < p.k; ++i) {
            magnitude += std::fabs(double(x[static_cast<size_t>(t * p.x_stride + i)]) * bf16_to_float(w[static_cast<size_t>(i * p.n + c)]));
          }
          ASSERT_LE(std::fabs(double(y[at]) - ref[at]), 1e-5 * magnitude)
              << isa_name(isa) << " k " << p.k << " n " << p.n << " token " << t << " col " << c;
        }
      }
    }
  }
}

// The composite of a block of heads over a step (absorption, attention, W_UV, chunks of
// kMlaTokenChunk tokens across sequence boundaries, q read and out written in place) against the
// double references chained per sequence. Only this call's heads' columns are written; a wrong
// head, stride, sequence or chunk offset gives O(1).
TEST(MlaAttentionHeads, MatchesChainedReferences) {
  std::mt19937_64 rng = test::make_rng();
  const int64_t heads = 5, nope = 64, rope = 32, vd = 48, lora = 128, qk = nope + rope;
  const std::vector<std::vector<int64_t>> steps = {{1}, {40}, {5, 30, 12}, {1, 1, 1}, {33, 1}};
  for (const auto& lengths : steps) {
    int64_t total = 0;
    for (int64_t n : lengths) total += n;
    const auto q = random_f32(static_cast<size_t>(total * heads * qk), rng);
    const auto w_uk = random_bf16(static_cast<size_t>(heads * nope * lora), rng, 0.2f);
    const auto w_uv_t = random_bf16(static_cast<size_t>(heads * lora * vd), rng, 0.2f);
    std::vector<Case> caches;  // each sequence's paged cache
    std::vector<MlaSequence> seqs;
    for (int64_t n : lengths) {
      caches.emplace_back(lora, rope, heads, n, static_cast<int64_t>(rng() % 150), 48, rng, 1.0f);
    }
    for (const Case& cs : caches) seqs.push_back({.first_position = cs.first_position, .tokens = cs.tokens, .pages = cs.pages.data()});
    MlaHeadsParams p;
    p.heads = heads;
    p.nope = nope;
    p.rope = rope;
    p.v_dim = vd;
    p.lora = lora;
    p.head_begin = 1;
    p.head_end = 4;
    p.sequences = seqs.data();
    p.n_sequences = static_cast<int64_t>(seqs.size());
    p.q = q.data();
    p.w_uk = w_uk.data();
    p.w_uv_t = w_uv_t.data();
    p.page_tokens = 48;
    p.scale = 0.1f;
    // Reference: q_lat per (token, head), then per sequence the attention, then W_UV; in double.
    std::vector<float> ref = nan_vector(static_cast<size_t>(total * heads * vd));
    std::vector<float> q_lat(static_cast<size_t>(total * heads * lora)), o_lat(q_lat.size());
    for (int64_t h = p.head_begin; h < p.head_end; ++h) {
      MlaAbsorbParams a;
      a.w = w_uk.data() + h * nope * lora;
      a.k = nope;
      a.n = lora;
      a.x = q.data() + h * qk;
      a.x_stride = heads * qk;
      a.tokens = total;
      a.y = q_lat.data() + h * lora;
      a.y_stride = heads * lora;
      mla_absorb_reference(a);
    }
    int64_t t0 = 0;
    for (const MlaSequence& sq : seqs) {
      MlaAttentionParams at;
      at.lora = lora;
      at.rope = rope;
      at.first_position = sq.first_position;
      at.token_end = sq.tokens;
      at.head_begin = p.head_begin;
      at.head_end = p.head_end;
      at.q_lat = q_lat.data() + t0 * heads * lora;
      at.q_lat_token_stride = heads * lora;
      at.q_lat_head_stride = lora;
      at.q_pe = q.data() + t0 * heads * qk + nope;
      at.q_pe_token_stride = heads * qk;
      at.q_pe_head_stride = qk;
      at.pages = sq.pages;
      at.page_tokens = 48;
      at.scale = p.scale;
      at.out = o_lat.data() + t0 * heads * lora;
      at.out_token_stride = heads * lora;
      at.out_head_stride = lora;
      mla_attention_reference(at);
      t0 += sq.tokens;
    }
    for (int64_t h = p.head_begin; h < p.head_end; ++h) {
      MlaAbsorbParams a;
      a.w = w_uv_t.data() + h * lora * vd;
      a.k = lora;
      a.n = vd;
      a.x = o_lat.data() + h * lora;
      a.x_stride = heads * lora;
      a.tokens = total;
      a.y = ref.data() + h * vd;
      a.y_stride = heads * vd;
      mla_absorb_reference(a);
    }
    std::vector<float> out = nan_vector(ref.size());
    p.out = out.data();
    MlaHeadsScratch scratch;
    mla_attention_heads(p, scratch);
    for (int64_t t = 0; t < total; ++t) {
      double num = 0.0, den = 0.0;
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t e = 0; e < vd; ++e) {
          const size_t i = static_cast<size_t>((t * heads + h) * vd + e);
          if (h < p.head_begin || h >= p.head_end) {
            ASSERT_TRUE(std::isnan(out[i])) << "wrote head " << h << " outside [1, 4)";
            continue;
          }
          ASSERT_FALSE(std::isnan(out[i])) << "token " << t << " head " << h;
          num += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
          den += double(ref[i]) * ref[i];
        }
      }
      // BF16 q_lat and weights p: ~1e-3 (2^-9 per rounding), far under a wrong row's O(1).
      ASSERT_LT(std::sqrt(num / den), 1e-2) << "token " << t << " of a step of " << lengths.size() << " sequences";
    }
  }
}

TEST(MlaAttention, ValidateNamesTheBadField) {
  std::mt19937_64 rng(1);
  Case cs(64, 32, 2, 3, 10, 16, rng, 1.0f);
  std::vector<float> out(cs.out_size());
  const MlaAttentionParams good = cs.params(out.data());
  EXPECT_NO_THROW(validate(good));
  MlaAttentionParams p = good;
  p.lora = 48;
  EXPECT_THROW(validate(p), Error);
  p = good;
  p.rope = 0;
  EXPECT_THROW(validate(p), Error);
  p = good;
  p.token_end = 0;
  EXPECT_THROW(validate(p), Error);
  p = good;
  p.head_begin = 2;
  EXPECT_THROW(validate(p), Error);
  p = good;
  p.pages = nullptr;
  EXPECT_THROW(validate(p), Error);
  p = good;
  p.scale = NAN;
  EXPECT_THROW(validate(p), Error);
}

}  // namespace
}  // namespace hymoe::kernels
