#include "hymoe/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "hymoe/common/error.h"

namespace hymoe {
namespace {

// log_softmax normaliser of raw logits: max + log(sum exp(l - max)).
double log_normaliser(std::span<const float> logits) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  return static_cast<double>(mx) + std::log(sum);
}

}  // namespace

Sampler::Sampler(int32_t vocab_size) : vocab_(vocab_size) {
  HYMOE_CHECK(vocab_size > 0, kInvalidArgument, "sampler: vocab size must be positive, got {}", vocab_size);
  work_.resize(static_cast<size_t>(vocab_));
  order_.resize(static_cast<size_t>(vocab_));
  counts_.assign(static_cast<size_t>(vocab_), 0);
}

SampledToken Sampler::sample(std::span<const float> logits, const SamplingParams& p,
                             std::span<const int32_t> generated, uint64_t seed, uint64_t step) {
  HYMOE_CHECK(static_cast<int32_t>(logits.size()) == vocab_, kInternal,
              "sampler: {} logits for a vocabulary of {}", logits.size(), vocab_);
  const size_t n = static_cast<size_t>(vocab_);
  std::copy(logits.begin(), logits.end(), work_.begin());
  for (const auto& [t, b] : p.logit_bias) {
    if (t >= 0 && t < vocab_) work_[static_cast<size_t>(t)] += b;
  }

  // Log-probabilities come from the biased logits, before penalties: the normaliser and the top
  // alternatives are taken now, the chosen token's value after the draw.
  SampledToken out;
  double norm = 0.0;
  if (p.logprobs) {
    norm = log_normaliser(work_);
    if (p.top_logprobs > 0) {
      const size_t k = std::min<size_t>(static_cast<size_t>(p.top_logprobs), n);
      std::iota(order_.begin(), order_.end(), 0);
      std::partial_sort(order_.begin(), order_.begin() + static_cast<ptrdiff_t>(k), order_.end(),
                        [this](int32_t a, int32_t b) {
                          const float va = work_[static_cast<size_t>(a)], vb = work_[static_cast<size_t>(b)];
                          return va > vb || (va == vb && a < b);
                        });
      out.top.reserve(k);
      for (size_t i = 0; i < k; ++i) {
        if (work_[static_cast<size_t>(order_[i])] == -std::numeric_limits<float>::infinity()) break;  // masked
        out.top.emplace_back(order_[i], static_cast<float>(work_[static_cast<size_t>(order_[i])] - norm));
      }
    }
  }

  // Penalties over generated tokens (counts_ is all zero between calls).
  const bool penalise = p.presence_penalty != 0.0 || p.frequency_penalty != 0.0;
  if (penalise) {
    for (int32_t t : generated) {
      if (t >= 0 && t < vocab_) ++counts_[static_cast<size_t>(t)];
    }
    for (int32_t t : generated) {
      if (t < 0 || t >= vocab_) continue;
      int32_t& c = counts_[static_cast<size_t>(t)];
      if (c == 0) continue;  // already applied for a repeated id
      work_[static_cast<size_t>(t)] -= static_cast<float>(p.presence_penalty + p.frequency_penalty * c);
      c = 0;
    }
  }
  // NaN logits never win: treat them as -inf.
  for (float& v : work_) {
    if (std::isnan(v)) v = -std::numeric_limits<float>::infinity();
  }

  int32_t chosen = 0;
  if (p.greedy()) {
    chosen = static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) - work_.begin());
  } else {
    // Candidates, best first where order matters. top_k bounds the set first.
    std::iota(order_.begin(), order_.end(), 0);
    auto better = [this](int32_t a, int32_t b) {
      return work_[static_cast<size_t>(a)] > work_[static_cast<size_t>(b)] ||
             (work_[static_cast<size_t>(a)] == work_[static_cast<size_t>(b)] && a < b);
    };
    size_t m = n;
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
      m = static_cast<size_t>(p.top_k);
      std::nth_element(order_.begin(), order_.begin() + static_cast<ptrdiff_t>(m), order_.end(), better);
    }
    // Probabilities over the candidates at temperature T.
    const double inv_t = 1.0 / p.temperature;
    float mx = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < m; ++i) mx = std::max(mx, work_[static_cast<size_t>(order_[i])]);
    double total = 0.0;
    for (size_t i = 0; i < m; ++i) {
      float& v = work_[static_cast<size_t>(order_[i])];
      v = static_cast<float>(std::exp((static_cast<double>(v) - mx) * inv_t));
      total += v;
    }
    // top_p: sort a growing prefix until it holds top_p of the mass (exact, usually small).
    if (p.top_p < 1.0) {
      size_t want = std::min<size_t>(m, 64);
      while (true) {
        std::partial_sort(order_.begin(), order_.begin() + static_cast<ptrdiff_t>(want),
                          order_.begin() + static_cast<ptrdiff_t>(m), better);
        double cum = 0.0;
        size_t keep = 0;
        while (keep < want && cum < p.top_p * total) cum += work_[static_cast<size_t>(order_[keep++])];
        if (cum >= p.top_p * total || want == m) {
          m = std::max<size_t>(keep, 1);
          break;
        }
        want = std::min(m, want * 4);
      }
    }
    // min_p relative to the most likely candidate.
    if (p.min_p > 0.0) {
      float pmax = 0.0f;
      for (size_t i = 0; i < m; ++i) pmax = std::max(pmax, work_[static_cast<size_t>(order_[i])]);
      const float cut = static_cast<float>(p.min_p) * pmax;
      size_t w = 0;
      for (size_t i = 0; i < m; ++i) {
        if (work_[static_cast<size_t>(order_[i])] >= cut) order_[w++] = order_[i];
      }
      m = w;
    }
    double mass = 0.0;
    for (size_t i = 0; i < m; ++i) mass += work_[static_cast<size_t>(order_[i])];
    // Deterministic order for the draw: by id, so the result does not depend on selection order.
    std::sort(order_.begin(), order_.begin() + static_cast<ptrdiff_t>(m));
    const double target = sampling_uniform(seed, step) * mass;
    double cum = 0.0;
    // When rounding leaves target >= cum at the end, the last candidate of nonzero weight: never
    // a token of weight 0 (a masked one, logit -inf).
    chosen = order_[m - 1];
    for (size_t i = 0; i < m; ++i) {
      const float w = work_[static_cast<size_t>(order_[i])];
      if (w > 0.0f) chosen = order_[i];
      cum += w;
      if (target < cum) {
        chosen = order_[i];
        break;
      }
    }
  }

  out.token = chosen;
  if (p.logprobs) {
    float v = logits[static_cast<size_t>(chosen)];
    const auto b = std::lower_bound(p.logit_bias.begin(), p.logit_bias.end(), chosen,
                                    [](const std::pair<int32_t, float>& e, int32_t t) { return e.first < t; });
    if (b != p.logit_bias.end() && b->first == chosen) v += b->second;  // the same float sum as work_
    out.logprob = static_cast<float>(static_cast<double>(v) - norm);
  }
  return out;
}

}  // namespace hymoe
