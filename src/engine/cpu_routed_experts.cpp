#include "hymoe/engine/cpu_routed_experts.h"

#include <algorithm>

#include "cpu_ops.h"
#include "hymoe/kernels/silu_mul.h"

namespace hymoe {

using engine::room;

CpuRoutedExperts::CpuRoutedExperts(cpu::ThreadPool& pool, const ModelConfig& c)
    : pool_(pool), hidden_(c.hidden_size), experts_(c.n_routed_experts) {
  cpu::MoeShape shape;
  shape.num_experts = c.n_routed_experts;
  shape.hidden = c.hidden_size;
  shape.intermediate = c.moe_intermediate_size;
  shape.max_top_k = static_cast<int>(c.num_experts_per_tok);
  moe_ = std::make_unique<cpu::MoeExecutor>(pool_, shape);
}

CpuRoutedExperts::~CpuRoutedExperts() = default;

void CpuRoutedExperts::run(std::span<const MlpWeights> experts, const uint16_t* x, int64_t T, int64_t D,
                           const int32_t* ids, const float* weights, int top_k, float* out) {
  const int64_t hidden = hidden_, E = experts_, K = top_k;
  // Decode tokens through the NUMA MoE executor, up to kMaxMoeTokens at a time.
  for (int64_t t0 = 0; t0 < D; t0 += cpu::kMaxMoeTokens) {
    cpu::MoeBatch mb;
    mb.tokens = static_cast<int>(std::min<int64_t>(cpu::kMaxMoeTokens, D - t0));
    mb.hidden = x + t0 * hidden;
    mb.top_k = top_k;
    mb.ids = ids + t0 * K;
    mb.weights = weights + t0 * K;
    mb.out = out + t0 * hidden;
    mb.accumulate = true;
    moe_->run(experts, mb);
  }
  if (D == T) return;
  // Prompt tokens: per expert, its tokens gathered into one GEMM batch (a counting sort by expert:
  // tokens ascending within an expert, experts ascending for a token).
  off_.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = D * K; i < T * K; ++i) ++off_[static_cast<size_t>(ids[i]) + 1];
  for (int64_t e = 0; e < E; ++e) off_[static_cast<size_t>(e + 1)] += off_[static_cast<size_t>(e)];
  cur_.assign(off_.begin(), off_.end() - 1);
  slots_.resize(static_cast<size_t>((T - D) * K));
  for (int64_t t = D; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k)
      slots_[static_cast<size_t>(cur_[static_cast<size_t>(ids[t * K + k])]++)] = {t, weights[t * K + k]};
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t begin = off_[static_cast<size_t>(e)], n = off_[static_cast<size_t>(e + 1)] - begin;
    if (n == 0) continue;
    const MlpWeights& w = experts[static_cast<size_t>(e)];
    const int64_t inter = w.gate.rows;
    uint16_t* g = room(gather_, static_cast<size_t>(n * hidden));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = slots_[static_cast<size_t>(begin + i)].first;
      std::copy(x + t * hidden, x + (t + 1) * hidden, g + i * hidden);
    }
    float* gate = room(gate_, static_cast<size_t>(n * inter));
    float* up = room(up_, static_cast<size_t>(n * inter));
    engine::fp8_linear(pool_, w.gate, g, w.gate.cols, n, 0, gate, false);
    engine::fp8_linear(pool_, w.up, g, w.up.cols, n, 0, up, false);
    uint16_t* act = room(act_, static_cast<size_t>(n * inter));
    for (int64_t i = 0; i < n; ++i) kernels::silu_mul_bf16(gate + i * inter, up + i * inter, inter, act + i * inter);
    float* eo = room(expert_out_, static_cast<size_t>(n * hidden));
    engine::fp8_linear(pool_, w.down, act, inter, n, 0, eo, false);
    for (int64_t i = 0; i < n; ++i) {
      const auto [t, wt] = slots_[static_cast<size_t>(begin + i)];
      float* dst = out + t * hidden;
      const float* src = eo + i * hidden;
      for (int64_t j = 0; j < hidden; ++j) dst[j] += wt * src[j];
    }
  }
}

}  // namespace hymoe
