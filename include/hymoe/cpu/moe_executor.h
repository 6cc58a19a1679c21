// The routed experts of one MoE layer on the CPU, for a decode micro-batch of 1..8 tokens.
//
// Work: every active expert (picked by at least one token) is split along its output dims into
// tasks: gate/up tasks (rows r0..r1 of gate and of up, for the expert's tokens, ending with
// act = bf16(silu(gate) * up) for those rows) and down tasks (rows of down, written already
// multiplied by each token's routing weight into that (token, slot)'s partial output).
// Each expert's tasks go to the worker group of the NUMA node that holds it
// (expert_numa_node() of hymoe/model/placement.h), gate/up tasks before down tasks, and workers
// take tasks in order from an atomic counter; a group that runs dry steals from the others.
// Per-expert barrier: a counter of unfinished gate/up tasks; a down task of expert e waits only
// for e's counter to reach zero, so experts flow through without a layer-wide barrier. A node's
// queue holds an expert's down tasks behind the next expert's gate/up tasks (MoeTuning::down_lag),
// so that the workers who reach them find the barrier open instead of spinning on the expert's
// last gate/up tasks.
// Two global synchronisations per layer: after all tasks (then the top_k partial outputs of each
// token are summed, split over the hidden dim), and at the end of that sum.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/model/model_weights.h"

namespace hymoe::cpu {

inline constexpr int kMaxMoeTokens = 8;
inline constexpr int kMaxMoeTopK = 16;

struct MoeShape {
  int64_t num_experts = 256;
  int64_t hidden = 7168;
  int64_t intermediate = 2048;  // moe_intermediate_size
  int max_tokens = kMaxMoeTokens;
  int max_top_k = 8;
};

// One call's inputs and output.
struct MoeBatch {
  int tokens = 1;                  // 1..max_tokens
  const uint16_t* hidden = nullptr;  // BF16 [tokens][hidden]: the normed input of the MoE block
  int top_k = 8;                   // 1..max_top_k
  const int32_t* ids = nullptr;    // [tokens][top_k] expert ids (distinct per token)
  const float* weights = nullptr;  // [tokens][top_k] routing weights (scaling applied)
  float* out = nullptr;            // FP32 [tokens][hidden]
  bool accumulate = false;         // out += result (e.g. onto the shared expert); else out = result
};

struct MoeTuning {
  int64_t task_bytes = 384 << 10;  // weight bytes per task (sets the rows per task)
  bool steal = true;               // idle groups take tasks of other nodes
  // Experts of a node whose gate/up tasks come between an expert's gate/up tasks and its down
  // tasks in the node's queue (0: right after them). 1 hides the wait for an expert's gate/up
  // results behind the next expert's (layer 0.87-0.92x the time of 0 on the 16-core Xeon).
  int down_lag = 1;
};

class MoeExecutor {
 public:
  // Allocates every buffer once; run() allocates nothing.
  MoeExecutor(ThreadPool& pool, const MoeShape& shape, const MoeTuning& tuning = {});
  ~MoeExecutor();
  MoeExecutor(const MoeExecutor&) = delete;
  MoeExecutor& operator=(const MoeExecutor&) = delete;

  // experts[e] for e < num_experts; shapes gate/up [intermediate, hidden], down [hidden,
  // intermediate]. Throws hymoe::Error (kInvalidArgument) on a bad batch or shape.
  void run(std::span<const MlpWeights> experts, const MoeBatch& batch);

  const MoeShape& shape() const { return shape_; }
  // Of the last run(): experts computed, tasks, tasks a group took from another node's queue, and
  // the workers' time spent at the per-expert barriers (summed over workers).
  struct RunStats {
    int active_experts = 0;
    int tasks = 0;
    int stolen = 0;
    double barrier_wait_us = 0;
  };
  RunStats last_run_stats() const;
  // Rows per gate/up task and per down task (for logs and benchmarks).
  int64_t gate_up_rows_per_task() const { return gu_rows_; }
  int64_t down_rows_per_task() const { return down_rows_; }

 private:
  struct Task;
  struct Expert;
  struct Group;
  void plan(std::span<const MlpWeights> experts, const MoeBatch& batch);
  void work(const WorkerInfo& w);
  void combine(const WorkerInfo& w, const MoeBatch& batch);
  void run_task(const Task& t);

  ThreadPool& pool_;
  MoeShape shape_;
  MoeTuning tuning_;
  int64_t gu_rows_ = 0;
  int64_t down_rows_ = 0;

  std::unique_ptr<Expert[]> experts_;  // active experts of the current call
  int n_active_ = 0;
  std::vector<int> slot_of_expert_;    // expert id -> active index, -1 when inactive
  std::unique_ptr<Group[]> groups_;
  std::vector<float> gate_buf_, up_buf_;  // [active][max_tokens][intermediate]
  std::vector<uint16_t> act_buf_;         // [active][max_tokens][intermediate] BF16
  std::vector<float> slot_out_;           // [tokens][top_k][hidden]
  const MlpWeights* weights_ = nullptr;
  const uint16_t* batch_hidden_ = nullptr;
  int batch_top_k_ = 1;
  std::atomic<int> stolen_{0};
  std::atomic<int64_t> barrier_wait_ns_{0};
};

// Reference: per token, sum_k w_k * down_e(bf16(silu(gate_e x) * up_e x)) in double, with the
// same BF16 rounding of the activation as the executor.
void moe_reference(std::span<const MlpWeights> experts, int64_t hidden, int64_t intermediate,
                   const MoeBatch& batch);

}  // namespace hymoe::cpu
