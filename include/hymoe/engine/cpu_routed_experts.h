// The routed experts of an MoE layer on the CPU, for every executor that places them there (the
// CPU engine, the hybrid GPU/CPU engine): decode rows through the NUMA MoE executor (up to
// cpu::kMaxMoeTokens sharing a pass over each expert's weights), prompt rows gathered per expert
// into one FP8 GEMM batch each. Each kind of row always takes its own path (batch invariance).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "hymoe/cpu/moe_executor.h"
#include "hymoe/cpu/thread_pool.h"
#include "hymoe/model/config.h"
#include "hymoe/model/model_weights.h"

namespace hymoe {

class CpuRoutedExperts {
 public:
  CpuRoutedExperts(cpu::ThreadPool& pool, const ModelConfig& config);
  ~CpuRoutedExperts();
  CpuRoutedExperts(const CpuRoutedExperts&) = delete;
  CpuRoutedExperts& operator=(const CpuRoutedExperts&) = delete;

  // out[t] += sum_k weights[t][k] * expert_{ids[t][k]}(x[t]) for t < tokens. x BF16
  // [tokens][hidden]; ids / weights [tokens][top_k]; out FP32 [tokens][hidden]. Rows
  // [0, decode_rows) are decode tokens.
  void run(std::span<const MlpWeights> experts, const uint16_t* x, int64_t tokens, int64_t decode_rows,
           const int32_t* ids, const float* weights, int top_k, float* out);

  // The NUMA executor's statistics of its last run (benchmarks).
  const cpu::MoeExecutor* numa() const { return moe_.get(); }

 private:
  cpu::ThreadPool& pool_;
  int64_t hidden_ = 0;
  int64_t experts_ = 0;
  std::unique_ptr<cpu::MoeExecutor> moe_;
  // Prompt rows: their (row, weight) slots sorted by expert, with offsets; per-expert scratch.
  std::vector<int64_t> off_, cur_;
  std::vector<std::pair<int64_t, float>> slots_;
  std::vector<uint16_t> gather_, act_;
  std::vector<float> gate_, up_, expert_out_;
};

}  // namespace hymoe
