#include "hymoe/cpu/moe_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/kernels/fp8_gemv.h"
#include "hymoe/kernels/silu_mul.h"
#include "hymoe/model/placement.h"

namespace hymoe::cpu {

struct MoeExecutor::Task {
  int32_t expert = 0;  // active index
  bool down = false;
  int64_t r0 = 0, r1 = 0;
};

struct MoeExecutor::Expert {
  int id = 0;
  int node = 0;
  int n_tok = 0;
  int tok[kMaxMoeTokens] = {};
  int slot[kMaxMoeTokens] = {};
  float weight[kMaxMoeTokens] = {};
  alignas(64) std::atomic<int> gate_up_left{0};  // the per-expert barrier
};

struct MoeExecutor::Group {
  std::vector<Task> tasks;  // capacity fixed at construction
  int n_tasks = 0;
  alignas(64) std::atomic<int> next{0};
};

namespace {

int64_t rows_for(int64_t bytes, int64_t cols_bytes, int64_t max_rows) {
  int64_t rows = (bytes / std::max<int64_t>(cols_bytes, 1) + 8) / 16 * 16;
  return std::clamp<int64_t>(rows, 16, std::max<int64_t>(max_rows, 16));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

MoeExecutor::MoeExecutor(ThreadPool& pool, const MoeShape& shape, const MoeTuning& tuning)
    : pool_(pool), shape_(shape), tuning_(tuning) {
  HYMOE_CHECK(shape.num_experts > 0 && shape.hidden > 0 && shape.intermediate > 0,
              kInvalidArgument, "moe: empty shape");
  HYMOE_CHECK(shape.max_tokens >= 1 && shape.max_tokens <= kMaxMoeTokens, kInvalidArgument,
              "moe: max_tokens {} outside 1..{}", shape.max_tokens, kMaxMoeTokens);
  HYMOE_CHECK(shape.max_top_k >= 1 && shape.max_top_k <= kMaxMoeTopK, kInvalidArgument,
              "moe: max_top_k {} outside 1..{}", shape.max_top_k, kMaxMoeTopK);
  gu_rows_ = rows_for(tuning.task_bytes, 2 * shape.hidden, shape.intermediate);
  down_rows_ = rows_for(tuning.task_bytes, shape.intermediate, shape.hidden);
  const int64_t max_active =
      std::min<int64_t>(shape.num_experts, int64_t{shape.max_tokens} * shape.max_top_k);
  experts_ = std::make_unique<Expert[]>(static_cast<size_t>(max_active));
  slot_of_expert_.assign(static_cast<size_t>(shape.num_experts), -1);
  groups_ = std::make_unique<Group[]>(static_cast<size_t>(pool.num_groups()));
  const int64_t tasks_per_expert =
      ceil_div(shape.intermediate, gu_rows_) + ceil_div(shape.hidden, down_rows_);
  for (int g = 0; g < pool.num_groups(); ++g)
    groups_[g].tasks.resize(static_cast<size_t>(max_active * tasks_per_expert));
  const size_t per_expert = static_cast<size_t>(shape.max_tokens * shape.intermediate);
  gate_buf_.resize(static_cast<size_t>(max_active) * per_expert);
  up_buf_.resize(gate_buf_.size());
  act_buf_.resize(gate_buf_.size());
  slot_out_.resize(static_cast<size_t>(shape.max_tokens * shape.max_top_k * shape.hidden));
}

MoeExecutor::~MoeExecutor() = default;

void MoeExecutor::plan(std::span<const MlpWeights> experts, const MoeBatch& b) {
  HYMOE_CHECK(static_cast<int64_t>(experts.size()) == shape_.num_experts, kInvalidArgument,
              "moe: {} experts given, shape has {}", experts.size(), shape_.num_experts);
  HYMOE_CHECK(b.tokens >= 1 && b.tokens <= shape_.max_tokens, kInvalidArgument,
              "moe: {} tokens outside 1..{}", b.tokens, shape_.max_tokens);
  HYMOE_CHECK(b.top_k >= 1 && b.top_k <= shape_.max_top_k, kInvalidArgument,
              "moe: top_k {} outside 1..{}", b.top_k, shape_.max_top_k);
  HYMOE_CHECK(b.hidden && b.ids && b.weights && b.out, kInvalidArgument, "moe: null batch field");
  for (int a = 0; a < n_active_; ++a) slot_of_expert_[experts_[a].id] = -1;
  n_active_ = 0;
  for (int t = 0; t < b.tokens; ++t) {
    for (int k = 0; k < b.top_k; ++k) {
      const int e = b.ids[t * b.top_k + k];
      HYMOE_CHECK(e >= 0 && e < shape_.num_experts, kInvalidArgument,
                  "moe: token {} expert id {} outside 0..{}", t, e, shape_.num_experts - 1);
      int& a = slot_of_expert_[e];
      if (a < 0) {
        a = n_active_++;
        Expert& ex = experts_[a];
        ex.id = e;
        ex.node = expert_numa_node(e, shape_.num_experts, pool_.num_groups());
        ex.n_tok = 0;
      }
      Expert& ex = experts_[a];
      HYMOE_CHECK(ex.n_tok == 0 || ex.tok[ex.n_tok - 1] != t, kInvalidArgument,
                  "moe: token {} lists expert {} twice", t, e);
      ex.tok[ex.n_tok] = t;
      ex.slot[ex.n_tok] = k;
      ex.weight[ex.n_tok] = b.weights[t * b.top_k + k];
      ++ex.n_tok;
    }
  }
  for (int a = 0; a < n_active_; ++a) {
    const MlpWeights& w = experts[experts_[a].id];
    HYMOE_CHECK(w.gate.rows == shape_.intermediate && w.gate.cols == shape_.hidden &&
                    w.up.rows == shape_.intermediate && w.up.cols == shape_.hidden &&
                    w.down.rows == shape_.hidden && w.down.cols == shape_.intermediate,
                kInvalidArgument, "moe: expert {} has shapes gate {}x{} up {}x{} down {}x{}",
                experts_[a].id, w.gate.rows, w.gate.cols, w.up.rows, w.up.cols, w.down.rows,
                w.down.cols);
  }
  // Tasks per node: each expert's gate/up tasks, and its down tasks behind the gate/up tasks of
  // the node's next down_lag experts (every expert's gate/up tasks stay ahead of its down tasks in
  // the one queue they share, so a worker waiting at a barrier waits for tasks already taken).
  const int lag = std::max(0, tuning_.down_lag);
  for (int g = 0; g < pool_.num_groups(); ++g) {
    Group& grp = groups_[g];
    grp.n_tasks = 0;
    grp.next.store(0, std::memory_order_relaxed);
    int order[kMaxMoeTokens * kMaxMoeTopK];  // this node's active experts, in order
    int n = 0;
    for (int a = 0; a < n_active_; ++a)
      if (experts_[a].node == g) order[n++] = a;
    for (int i = 0; i < n + lag; ++i) {
      if (i < n) {
        Expert& ex = experts_[order[i]];
        int gu = 0;
        for (int64_t r = 0; r < shape_.intermediate; r += gu_rows_, ++gu)
          grp.tasks[grp.n_tasks++] =
              Task{order[i], false, r, std::min(shape_.intermediate, r + gu_rows_)};
        ex.gate_up_left.store(gu, std::memory_order_relaxed);
      }
      if (i >= lag && i - lag < n)
        for (int64_t r = 0; r < shape_.hidden; r += down_rows_)
          grp.tasks[grp.n_tasks++] =
              Task{order[i - lag], true, r, std::min(shape_.hidden, r + down_rows_)};
    }
  }
  weights_ = experts.data();
}

void MoeExecutor::run_task(const Task& t) {
  Expert& ex = experts_[t.expert];
  const MlpWeights& w = weights_[ex.id];
  const int64_t inter = shape_.intermediate, hidden = shape_.hidden;
  const size_t base = static_cast<size_t>(t.expert) * shape_.max_tokens * inter;
  kernels::Fp8GemvParams p;
  p.batch = ex.n_tok;
  p.row_begin = t.r0;
  p.row_end = t.r1;
  if (!t.down) {
    p.w = w.gate;
    for (int b = 0; b < ex.n_tok; ++b) {
      p.x[b] = batch_hidden_ + ex.tok[b] * hidden;
      p.y[b] = gate_buf_.data() + base + b * inter;
    }
    p.prefetch_next = w.up.data + t.r0 * w.up.cols;  // the up rows come next
    kernels::fp8_gemv(p);
    p.w = w.up;
    p.prefetch_next = nullptr;
    for (int b = 0; b < ex.n_tok; ++b) p.y[b] = up_buf_.data() + base + b * inter;
    kernels::fp8_gemv(p);
    for (int b = 0; b < ex.n_tok; ++b) {
      const size_t o = base + b * inter + t.r0;
      kernels::silu_mul_bf16(gate_buf_.data() + o, up_buf_.data() + o, t.r1 - t.r0,
                             act_buf_.data() + o);
    }
    ex.gate_up_left.fetch_sub(1, std::memory_order_release);
    return;
  }
  if (ex.gate_up_left.load(std::memory_order_acquire) != 0) {
    const auto t0 = std::chrono::steady_clock::now();
    while (ex.gate_up_left.load(std::memory_order_acquire) != 0) __builtin_ia32_pause();
    barrier_wait_ns_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count(),
        std::memory_order_relaxed);
  }
  p.w = w.down;
  for (int b = 0; b < ex.n_tok; ++b) {
    p.x[b] = act_buf_.data() + base + b * inter;
    p.y[b] = slot_out_.data() + (ex.tok[b] * batch_top_k_ + ex.slot[b]) * hidden;
    p.out_scale[b] = ex.weight[b];
  }
  kernels::fp8_gemv(p);
}

void MoeExecutor::work(const WorkerInfo& w) {
  const int n = pool_.num_groups();
  for (int i = 0; i < n; ++i) {
    if (i > 0 && !tuning_.steal) break;
    Group& g = groups_[(w.node + i) % n];
    for (int task = g.next.fetch_add(1, std::memory_order_relaxed); task < g.n_tasks;
         task = g.next.fetch_add(1, std::memory_order_relaxed)) {
      run_task(g.tasks[task]);
      if (i > 0) stolen_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void MoeExecutor::combine(const WorkerInfo& w, const MoeBatch& b) {
  const int64_t hidden = shape_.hidden;
  const int64_t chunk = ceil_div(ceil_div(hidden, pool_.size()), 16) * 16;
  const int64_t i0 = std::min(hidden, w.index * chunk), i1 = std::min(hidden, i0 + chunk);
  for (int t = 0; t < b.tokens; ++t) {
    float* out = b.out + t * hidden;
    const float* src = slot_out_.data() + t * b.top_k * hidden;
    for (int64_t i = i0; i < i1; ++i) {
      float s = b.accumulate ? out[i] : 0.0f;
      for (int k = 0; k < b.top_k; ++k) s += src[k * hidden + i];
      out[i] = s;
    }
  }
}

void MoeExecutor::run(std::span<const MlpWeights> experts, const MoeBatch& batch) {
  plan(experts, batch);
  stolen_.store(0, std::memory_order_relaxed);
  barrier_wait_ns_.store(0, std::memory_order_relaxed);
  batch_hidden_ = batch.hidden;
  batch_top_k_ = batch.top_k;
  pool_.run([this](const WorkerInfo& w) { work(w); });                    // sync 1
  pool_.run([this, &batch](const WorkerInfo& w) { combine(w, batch); });  // sync 2
}

MoeExecutor::RunStats MoeExecutor::last_run_stats() const {
  RunStats s;
  s.active_experts = n_active_;
  for (int g = 0; g < pool_.num_groups(); ++g) s.tasks += groups_[g].n_tasks;
  s.stolen = stolen_.load(std::memory_order_relaxed);
  s.barrier_wait_us = static_cast<double>(barrier_wait_ns_.load(std::memory_order_relaxed)) / 1e3;
  return s;
}

void moe_reference(std::span<const MlpWeights> experts, int64_t hidden, int64_t intermediate,
                   const MoeBatch& b) {
  auto dot = [](const Fp8Matrix& m, int64_t row, auto&& x) {
    double s = 0.0;
    for (int64_t j = 0; j < m.cols; ++j)
      s += static_cast<double>(kFp8E4M3Table[m.data[row * m.cols + j]]) * m.scale(row, j) * x(j);
    return s;
  };
  std::vector<double> acc(static_cast<size_t>(hidden));
  std::vector<float> act(static_cast<size_t>(intermediate));
  for (int t = 0; t < b.tokens; ++t) {
    const uint16_t* x = b.hidden + t * hidden;
    auto xin = [x](int64_t j) { return static_cast<double>(bf16_to_float(x[j])); };
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = 0; k < b.top_k; ++k) {
      const MlpWeights& w = experts[b.ids[t * b.top_k + k]];
      for (int64_t r = 0; r < intermediate; ++r) {
        const double g = dot(w.gate, r, xin), u = dot(w.up, r, xin);
        act[r] = round_to_bf16(static_cast<float>(g / (1.0 + std::exp(-g)) * u));
      }
      const double wk = b.weights[t * b.top_k + k];
      for (int64_t i = 0; i < hidden; ++i)
        acc[i] += wk * dot(w.down, i, [&act](int64_t j) { return static_cast<double>(act[j]); });
    }
    for (int64_t i = 0; i < hidden; ++i) {
      float* o = b.out + t * hidden + i;
      *o = static_cast<float>((b.accumulate ? *o : 0.0) + acc[i]);
    }
  }
}

}  // namespace hymoe::cpu
