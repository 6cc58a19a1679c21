// GPU sampling against a scalar sampler with the CPU sampler's semantics (engine/sampler.h):
// greedy with ties, top_k, top_p, min_p, temperature, NaN logits, seeded inverse-CDF draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpu_test_util.h"
#include "hymoe/gpu/sampling.h"

namespace hymoe::gpu {
namespace {

// What a correct sampler may answer for one row. The kernel sums probabilities in FP32 and in
// another order than this double reference, so the draw is checked as an interval test: the
// chosen token's cumulative interval (in id order over the kept set) must contain the target
// up to `tol`. Greedy rows must match exactly.
struct Reference {
  bool greedy = false;
  int greedy_token = -1;
  std::vector<int> kept;            // ids, ascending
  std::vector<double> cum_before;   // cumulative mass before each kept id
  std::vector<double> prob;         // each kept id's mass
  double target = 0.0, tol = 0.0;
};

Reference reference_sample(const float* logits, int vocab, const SamplingRow& o) {
  std::vector<float> v(logits, logits + vocab);
  for (float& x : v)
    if (std::isnan(x)) x = -INFINITY;
  Reference r;
  if (o.temperature == 0.0f || o.top_k == 1) {
    r.greedy = true;
    r.greedy_token = static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
    return r;
  }
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a] > v[b]; });
  size_t m = o.top_k > 0 && o.top_k < vocab ? size_t(o.top_k) : size_t(vocab);
  const double mx = v[order[0]];
  std::vector<double> p(vocab, 0.0);
  double total = 0.0;
  for (size_t i = 0; i < m; ++i) total += p[order[i]] = std::exp((v[order[i]] - mx) / o.temperature);
  double slack = 1e-5;  // FP32 sums over up to ~1e5 terms, relative to the mass
  if (o.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < m && cum < double{o.top_p} * total) cum += p[order[keep++]];
    // A cut within FP32 noise of the threshold may keep one token more or less: the kept mass
    // (and so the target) may then differ by that token's mass.
    const double before = cum - p[order[keep - 1]];
    if (std::abs(before - double{o.top_p} * total) < 1e-5 * total ||
        std::abs(cum - double{o.top_p} * total) < 1e-5 * total) {
      slack += (p[order[keep - 1]] + (keep < m ? p[order[keep]] : 0.0)) / total;
      if (keep < m) ++keep;  // the extra token is an acceptable answer too
    }
    m = std::max<size_t>(keep, 1);
  }
  for (size_t i = 0; i < m; ++i)
    if (p[order[i]] >= double{o.min_p} * p[order[0]]) r.kept.push_back(order[i]);
  std::sort(r.kept.begin(), r.kept.end());
  double mass = 0.0;
  for (int id : r.kept) {
    r.cum_before.push_back(mass);
    r.prob.push_back(p[id]);
    mass += p[id];
  }
  r.target = sampling_uniform_host(o.seed, o.step) * mass;
  r.tol = slack * mass;
  return r;
}

// Whether `token` is an answer the reference allows.
bool allowed(const Reference& r, int token) {
  if (r.greedy) return token == r.greedy_token;
  const auto it = std::lower_bound(r.kept.begin(), r.kept.end(), token);
  if (it == r.kept.end() || *it != token) return false;
  const size_t i = static_cast<size_t>(it - r.kept.begin());
  return r.target >= r.cum_before[i] - r.tol && r.target <= r.cum_before[i] + r.prob[i] + r.tol;
}

TEST(GpuHost, SamplingUniformIsTheCpuDraw) {
  // SplitMix64 of (seed, step), 53 bits: values in [0, 1), different per step.
  const double a = sampling_uniform_host(42, 0), b = sampling_uniform_host(42, 1);
  EXPECT_GE(a, 0.0);
  EXPECT_LT(a, 1.0);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, sampling_uniform_host(42, 0));
}

TEST(GpuHost, SamplingRefusesVocabularyAboveItsBound) {
  // Checked before anything is read or launched: the top_p mass histogram is exact only up to
  // kSamplingMaxVocab entries.
  float logits = 0.0f;
  SamplingRow row;
  int32_t token = 0;
  const SamplingParams p{&logits, &row, &token, 1, kSamplingMaxVocab + 1, kSamplingMaxVocab + 1};
  EXPECT_THROW(sample_tokens(p, nullptr), Error);
}

TEST(Sampling, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  Stream stream;
  for (const int vocab : {129280, 1000}) {
    const int64_t ld = vocab + 16;
    const SamplingRow kinds[] = {
        {0.0f, 0, 1.0f, 0.0f, 0, 0},     {1.0f, 1, 1.0f, 0.0f, 0, 0},    // greedy two ways
        {1.0f, 0, 1.0f, 0.0f, 0, 0},     {0.7f, 50, 1.0f, 0.0f, 0, 0},   // plain, top_k
        {1.0f, 0, 0.9f, 0.0f, 0, 0},     {1.3f, 0, 1.0f, 0.05f, 0, 0},   // top_p, min_p
        {0.8f, 40, 0.95f, 0.02f, 0, 0},  {2.0f, 3, 0.5f, 0.0f, 0, 0}};   // combined
    const int rows = 48;
    std::vector<SamplingRow> opts(rows);
    std::uniform_int_distribution<uint64_t> seeds;
    for (int r = 0; r < rows; ++r) {
      opts[r] = kinds[r % 8];
      opts[r].seed = seeds(rng);
      opts[r].step = r;
    }
    // Peaked logits so top_p/min_p bite: a few large values over a normal background.
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> logits(size_t(rows) * ld);
    for (auto& x : logits) x = dist(rng);
    for (int r = 0; r < rows; ++r) {
      logits[size_t(r) * ld + 7] = std::nanf("");
      for (int j = 0; j < 5; ++j) logits[size_t(r) * ld + (r * 131 + j * 977) % vocab] += 8.0f;
    }
    // Row 0: an exact tie for the maximum; greedy takes the lower id.
    logits[11] = logits[500] = 100.0f;
    auto dl = test::to_device(logits, stream);
    auto dopt = test::to_device(opts, stream);
    auto dtok = test::poisoned<int32_t>(rows, stream);
    sample_tokens({dl.as<float>(), dopt.as<SamplingRow>(), dtok.as<int32_t>(), rows, vocab, ld},
                  stream);
    const auto tokens = test::to_host<int32_t>(dtok, rows, stream);
    EXPECT_EQ(tokens[0], 11);
    int mismatches = 0;
    for (int r = 0; r < rows; ++r) {
      const Reference want = reference_sample(&logits[size_t(r) * ld], vocab, opts[r]);
      if (!allowed(want, tokens[r])) {
        ++mismatches;
        ADD_FAILURE() << "vocab " << vocab << " row " << r << " (kind " << r % 8 << "): got "
                      << tokens[r] << ", target " << want.target << " tol " << want.tol;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// Integer logits: thousands of exact ties at the top_k boundary, so which ties are kept (the
// lowest ids, as the CPU sampler's stable order keeps them) decides the kept set and the draw.
TEST(Sampling, TopKTiesKeepTheLowestIds) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  Stream stream;
  for (const int vocab : {129280, 1000}) {
    const SamplingRow kinds[] = {{1.0f, 50, 1.0f, 0.0f, 0, 0},
                                 {1.0f, 333, 1.0f, 0.0f, 0, 0},
                                 {0.9f, 777, 0.9f, 0.0f, 0, 0},
                                 {1.0f, 999, 1.0f, 0.01f, 0, 0}};
    const int rows = 16;
    std::vector<SamplingRow> opts(rows);
    std::uniform_int_distribution<uint64_t> seeds;
    for (int r = 0; r < rows; ++r) {
      opts[r] = kinds[r % 4];
      opts[r].seed = seeds(rng);
      opts[r].step = r;
    }
    std::normal_distribution<float> dist(0.0f, 1.5f);
    std::vector<float> logits(size_t(rows) * vocab);
    for (auto& x : logits) x = std::round(dist(rng));
    auto dl = test::to_device(logits, stream);
    auto dopt = test::to_device(opts, stream);
    auto dtok = test::poisoned<int32_t>(rows, stream);
    sample_tokens({dl.as<float>(), dopt.as<SamplingRow>(), dtok.as<int32_t>(), rows, vocab, vocab},
                  stream);
    const auto tokens = test::to_host<int32_t>(dtok, rows, stream);
    for (int r = 0; r < rows; ++r) {
      const Reference want = reference_sample(&logits[size_t(r) * vocab], vocab, opts[r]);
      EXPECT_TRUE(allowed(want, tokens[r]))
          << "vocab " << vocab << " row " << r << ": got " << tokens[r] << ", target "
          << want.target << " tol " << want.tol;
    }
  }
}

}  // namespace
}  // namespace hymoe::gpu
