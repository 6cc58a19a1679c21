// MLA prefill through cuDNN's fused attention: the graph, the plan cache and the execution.
#include "hymoe/gpu/mla_prefill_cudnn.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/stream.h"
#include "kernel_launch.h"
#include "mla_prefill_check.h"

#if HYMOE_HAVE_CUDNN_HEADERS
#include "cudnn_api.h"
#endif

namespace hymoe::gpu {

#if HYMOE_HAVE_CUDNN_HEADERS
namespace {

// Unique ids of the tensors the caller supplies at execution.
enum Uid : int64_t { kQ = 0, kK = 1, kV = 2, kO = 3, kScale = 5, kFill = 10, kShift = 19, kStats = 20 };
constexpr int kMaxPlans = 64;  // distinct (tokens, keys, strides) kept; the oldest goes first

// Whether p's keys are already one [k_nope | k_pe] row of 192 per head (k_pe stored per head
// right after k_nope, same token stride): then cuDNN reads K in place, with no gather.
bool keys_in_place(const MlaPrefillParams& p) {
  return p.k_nope != nullptr && p.k_pe_head_stride == p.k_head_stride &&
         p.k_pe_token_stride == p.k_token_stride && p.k_pe == p.k_nope + kMlaNopeDim;
}

// How K is laid out for cuDNN: token and head strides of a [.., 192] row per (key, head).
struct KeyLayout {
  int64_t token_stride, head_stride;
};
KeyLayout key_layout(const MlaPrefillParams& p) {
  if (keys_in_place(p)) return {p.k_token_stride, p.k_head_stride};
  return {int64_t{p.heads} * kMlaQkDim, kMlaQkDim};  // the gathered workspace
}

// The keys the graph reads: up to the last query's causal limit, or the whole window.
int graph_keys(const MlaPrefillParams& p) { return std::min(p.kv_tokens, p.past + p.tokens); }

// Everything that fixes a plan: shapes, strides, whether the causal diagonal is shifted and
// whether the log-sum-exp statistics are written.
using PlanKey = std::tuple<int, int, int, bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, bool>;

PlanKey key_of(const MlaPrefillParams& p) {
  const KeyLayout k = key_layout(p);
  return {p.tokens,         graph_keys(p),      p.heads,          p.past > 0,
          p.q_token_stride, p.q_head_stride,    k.token_stride,   k.head_stride,
          p.v_token_stride, p.v_head_stride,    p.out_token_stride, p.out_head_stride,
          p.lse != nullptr};
}

// The finalized execution plans of every engine cuDNN's heuristics offer for one graph (best
// guess first), and every descriptor they were built from (kept alive with them).
struct Plan {
  std::vector<CudnnDescriptor> parts;
  std::vector<CudnnDescriptor> candidates;
  std::vector<int64_t> workspace;  // bytes, per candidate
  int chosen = 0;
  bool tuned = false;
  int64_t max_workspace() const {
    int64_t m = 0;
    for (const int64_t w : workspace) m = std::max(m, w);
    return m;
  }
};

class GraphBuilder {
 public:
  explicit GraphBuilder(const CudnnApi& api) : api_(api) {}

  const CudnnDescriptor& tensor(int64_t uid, cudnnDataType_t type, std::vector<int64_t> dims,
                                std::vector<int64_t> strides, bool is_virtual,
                                bool by_value = false) {
    CudnnDescriptor t(api_, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set_data_type(CUDNN_ATTR_TENSOR_DATA_TYPE, type);
    t.set_int64(CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
    t.set_int64(CUDNN_ATTR_TENSOR_STRIDES, strides);
    t.set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, {uid});
    t.set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, {16});
    if (is_virtual) t.set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, true);
    if (by_value) t.set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
    t.finalize();
    return keep(std::move(t));
  }

  void matmul(const CudnnDescriptor& a, const CudnnDescriptor& b, const CudnnDescriptor& c) {
    CudnnDescriptor m(api_, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    m.set_data_type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
    m.finalize();
    CudnnDescriptor op(api_, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
    op.finalize();
    keep(std::move(m));
    add_op(std::move(op));
  }

  // y = mode(x[, b][, t]); axis < 0: none.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t precision, const CudnnDescriptor& x,
                 const CudnnDescriptor* b, const CudnnDescriptor* t, const CudnnDescriptor& y,
                 int64_t axis = -1) {
    CudnnDescriptor pw(api_, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    pw.set_data_type(CUDNN_ATTR_POINTWISE_MATH_PREC, precision);
    if (axis >= 0) pw.set_int64(CUDNN_ATTR_POINTWISE_AXIS, {axis});
    pw.finalize();
    CudnnDescriptor op(api_, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set_float(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1.0f);
    op.set_float(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1.0f);
    op.finalize();
    keep(std::move(pw));
    add_op(std::move(op));
  }

  void reduce(cudnnReduceTensorOp_t mode, const CudnnDescriptor& x, const CudnnDescriptor& y) {
    CudnnDescriptor r(api_, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    r.set_data_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    r.finalize();
    CudnnDescriptor op(api_, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    op.finalize();
    keep(std::move(r));
    add_op(std::move(op));
  }

  std::vector<cudnnBackendDescriptor_t> ops() const { return ops_; }
  // Hands over every descriptor made so far (the plan keeps them alive).
  std::vector<CudnnDescriptor> release() {
    std::vector<CudnnDescriptor> out;
    out.reserve(parts_.size());
    for (auto& d : parts_) out.push_back(std::move(d));
    parts_.clear();
    return out;
  }

 private:
  const CudnnDescriptor& keep(CudnnDescriptor d) {
    // deque: references to earlier elements stay valid as it grows.
    parts_.push_back(std::move(d));
    return parts_.back();
  }
  void add_op(CudnnDescriptor op) { ops_.push_back(keep(std::move(op)).get()); }

  const CudnnApi& api_;
  std::deque<CudnnDescriptor> parts_;
  std::vector<cudnnBackendDescriptor_t> ops_;
};

// The graph cuDNN's frontend emits for causal SDPA (its fused flash-attention engines match this
// pattern): S = Q K^T; S *= scale; keep S where row (+ past) >= column, else -inf; softmax as
// max / sub / exp / sum / div (with the log-sum-exp statistics, virtual); O = P V.
std::unique_ptr<Plan> build_plan(const CudnnApi& api, cudnnHandle_t handle,
                                 const MlaPrefillParams& p, std::string* why) {
  const int64_t H = p.heads, S = p.tokens, KV = graph_keys(p), D = kMlaQkDim, DV = kMlaVDim;
  GraphBuilder g(api);
  const auto f32 = CUDNN_DATA_FLOAT, bf16 = CUDNN_DATA_BFLOAT16;
  const std::vector<int64_t> score_dims{1, H, S, KV}, score_strides{H * S * KV, S * KV, KV, 1};
  const std::vector<int64_t> row_dims{1, H, S, 1}, row_strides{H * S, S, 1, 1};
  const std::vector<int64_t> one{1, 1, 1, 1};
  int64_t next_uid = 100;
  auto scores = [&](cudnnDataType_t type) -> const CudnnDescriptor& {
    return g.tensor(next_uid++, type, score_dims, score_strides, true);
  };
  auto per_row = [&]() -> const CudnnDescriptor& {
    return g.tensor(next_uid++, f32, row_dims, row_strides, true);
  };

  const auto& q = g.tensor(kQ, bf16, {1, H, S, D}, {S * p.q_token_stride, p.q_head_stride,
                                                    p.q_token_stride, 1}, false);
  // K [KV, H, 192] (gathered, or in place), seen transposed per head.
  const KeyLayout kl = key_layout(p);
  const auto& kt = g.tensor(kK, bf16, {1, H, D, KV},
                            {KV * kl.token_stride, kl.head_stride, 1, kl.token_stride}, false);
  const auto& v = g.tensor(kV, bf16, {1, H, KV, DV}, {KV * p.v_token_stride, p.v_head_stride,
                                                      p.v_token_stride, 1}, false);
  const auto& o = g.tensor(kO, bf16, {1, H, S, DV}, {S * p.out_token_stride, p.out_head_stride,
                                                     p.out_token_stride, 1}, false);
  const auto& scale = g.tensor(kScale, f32, one, one, false, true);
  const auto& fill = g.tensor(kFill, f32, one, one, false, true);

  const auto& s0 = scores(f32);
  g.matmul(q, kt, s0);
  const auto& s1 = scores(f32);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, s0, &scale, nullptr, s1);
  const auto& col = scores(CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s1, nullptr, nullptr, col, 3);
  const CudnnDescriptor* row = &scores(CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, s1, nullptr, nullptr, *row, 2);
  if (p.past > 0) {  // query i sits at position past + i
    const auto& shift = g.tensor(kShift, CUDNN_DATA_INT32, one, one, false, true);
    const auto& shifted = scores(CUDNN_DATA_INT32);
    g.pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, *row, &shift, nullptr, shifted, 3);
    row = &shifted;
  }
  const auto& allowed = scores(CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, *row, &col, nullptr, allowed);
  const auto& masked = scores(f32);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, s1, &fill, &allowed, masked);
  const auto& mx = per_row();
  g.reduce(CUDNN_REDUCE_TENSOR_MAX, masked, mx);
  const auto& centered = scores(f32);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, masked, &mx, nullptr, centered);
  const auto& e = scores(f32);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, centered, nullptr, nullptr, e);
  const auto& sum = per_row();
  g.reduce(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const auto& log_sum = per_row();
  g.pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, log_sum);
  // The statistics are an output where the caller merges windows (MlaPrefillParams::lse).
  const auto& stats = p.lse != nullptr ? g.tensor(kStats, f32, row_dims, row_strides, false) : per_row();
  g.pointwise(CUDNN_POINTWISE_ADD, f32, mx, &log_sum, nullptr, stats);
  const auto& probs = scores(bf16);
  g.pointwise(CUDNN_POINTWISE_DIV, f32, e, &sum, nullptr, probs);
  g.matmul(probs, v, o);

  CudnnDescriptor graph(api, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set_descs(CUDNN_ATTR_OPERATIONGRAPH_OPS, g.ops());
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (const cudnnStatus_t st = graph.try_finalize(); st != CUDNN_STATUS_SUCCESS) {
    if (why) *why = std::string("operation graph refused: ") + api.GetErrorString(st);
    return nullptr;
  }
  CudnnDescriptor heur(api, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (const cudnnStatus_t st = heur.try_finalize(); st != CUDNN_STATUS_SUCCESS) {
    if (why) *why = std::string("no engine heuristics: ") + api.GetErrorString(st);
    return nullptr;
  }
  constexpr int kConfigs = 8;
  std::vector<CudnnDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < kConfigs; ++i) {
    configs.emplace_back(api, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  HYMOE_CUDNN_CHECK(api.BackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, kConfigs, &returned,
                                            raw.data()));
  std::string refusals;
  auto out = std::make_unique<Plan>();
  for (int64_t i = 0; i < returned; ++i) {
    CudnnDescriptor plan(api, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i]);
    if (const cudnnStatus_t st = plan.try_finalize(); st != CUDNN_STATUS_SUCCESS) {
      refusals += std::string(refusals.empty() ? "" : "; ") + api.GetErrorString(st);
      continue;
    }
    int64_t count = 0, bytes = 0;
    HYMOE_CUDNN_CHECK(api.BackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              CUDNN_TYPE_INT64, 1, &count, &bytes));
    out->candidates.push_back(std::move(plan));
    out->workspace.push_back(bytes);
  }
  if (out->candidates.empty()) {
    if (why) {
      *why = "no engine takes the graph (" + std::to_string(returned) + " candidates" +
             (refusals.empty() ? "" : ": " + refusals) + ")";
    }
    return nullptr;
  }
  out->parts = g.release();
  out->parts.push_back(std::move(graph));
  out->parts.push_back(std::move(heur));
  for (auto& c : configs) out->parts.push_back(std::move(c));
  return out;
}

}  // namespace

struct MlaPrefillCudnn::Impl {
  const CudnnApi* api = nullptr;
  bool autotune = false;
  cudnnHandle_t handle = nullptr;
  MemoryBudget* budget = nullptr;
  DeviceBuffer workspace;
  std::mutex mutex;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  std::map<PlanKey, std::string> refused;
  std::deque<PlanKey> order;
  double last_build_ms = 0.0;

  ~Impl() {
    plans.clear();  // plans before the handle they were built with
    if (handle != nullptr) api->Destroy(handle);
  }

  // The plan for p, built on first use; nullptr (with why) when cuDNN refuses the shapes.
  Plan* plan_for(const MlaPrefillParams& p, std::string* why) {
    const PlanKey key = key_of(p);
    if (auto it = plans.find(key); it != plans.end()) return it->second.get();
    if (auto it = refused.find(key); it != refused.end()) {
      if (why) *why = it->second;
      return nullptr;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string reason;
    auto plan = build_plan(*api, handle, p, &reason);
    last_build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!plan) {
      if (why) *why = reason;
      if (static_cast<int>(refused.size()) >= kMaxPlans) refused.clear();
      refused.emplace(key, reason);
      return nullptr;
    }
    if (static_cast<int>(order.size()) >= kMaxPlans) {
      plans.erase(order.front());
      order.pop_front();
    }
    order.push_back(key);
    return plans.emplace(key, std::move(plan)).first->second.get();
  }
};

bool MlaPrefillCudnn::available(std::string* why) {
  if (CudnnApi::get(why) == nullptr) return false;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

MlaPrefillCudnn::MlaPrefillCudnn(MemoryBudget* budget, bool autotune)
    : impl_(std::make_unique<Impl>()) {
  std::string why;
  HYMOE_CHECK(available(&why), kUnsupported, "cuDNN attention unavailable: {}", why);
  impl_->api = CudnnApi::get();
  impl_->autotune = autotune;
  impl_->budget = budget;
  HYMOE_CUDNN_CHECK(impl_->api->Create(&impl_->handle));
}

MlaPrefillCudnn::~MlaPrefillCudnn() = default;

bool MlaPrefillCudnn::supports(const MlaPrefillParams& p, std::string* why) {
  check_mla_prefill_params(p, /*pointers=*/false);
  if (p.tokens == 0) return true;
  std::lock_guard lock(impl_->mutex);
  return impl_->plan_for(p, why) != nullptr;
}

void MlaPrefillCudnn::run(const MlaPrefillParams& p, cudaStream_t stream) {
  check_mla_prefill_params(p);
  if (p.tokens == 0) return;
  std::lock_guard lock(impl_->mutex);
  std::string why;
  Plan* plan = impl_->plan_for(p, &why);
  HYMOE_CHECK(plan != nullptr, kUnsupported,
              "cuDNN has no attention engine for {} tokens after {} with {} heads: {}", p.tokens,
              p.past, p.heads, why);
  const int keys = graph_keys(p);
  const bool gather = !keys_in_place(p);
  const size_t k_bytes = gather ? size_t(keys) * p.heads * kMlaQkDim * sizeof(Bf16) : 0;
  const size_t k_aligned = (k_bytes + 255) & ~size_t{255};
  const size_t need = std::max<size_t>(16, k_aligned + static_cast<size_t>(plan->max_workspace()));
  if (impl_->workspace.bytes() < need) {
    impl_->workspace = DeviceBuffer();  // free first (cudaFree waits for work using it)
    impl_->workspace = DeviceBuffer(need, impl_->budget);
  }
  Bf16* k = const_cast<Bf16*>(p.k_nope);
  if (gather) {
    k = impl_->workspace.as<Bf16>();
    HYMOE_CUDA_CHECK(launch::mla_gather_k(p, keys, k, stream));
  }
  void* ws = static_cast<char*>(impl_->workspace.data()) + k_aligned;

  float scale = p.softmax_scale;
  float fill = -INFINITY;
  int32_t shift = p.past;
  std::vector<int64_t> uids{kQ, kK, kV, kO, kScale, kFill};
  std::vector<void*> ptrs{const_cast<Bf16*>(p.q), k, const_cast<Bf16*>(p.v), p.out, &scale, &fill};
  if (p.past > 0) {
    uids.push_back(kShift);
    ptrs.push_back(&shift);
  }
  if (p.lse != nullptr) {
    uids.push_back(kStats);
    ptrs.push_back(p.lse);
  }
  const CudnnApi& api = *impl_->api;
  CudnnDescriptor pack(api, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(ptrs.size()), ptrs.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  pack.finalize();
  HYMOE_CUDNN_CHECK(api.SetStream(impl_->handle, stream));
  if (impl_->autotune && !plan->tuned && plan->candidates.size() > 1) {
    // Every candidate writes the same output from the same inputs: time each once, keep the
    // fastest for this shape (the last run's output stands).
    float best = INFINITY;
    for (size_t i = 0; i < plan->candidates.size(); ++i) {
      Event start, stop;
      start.record(stream);
      HYMOE_CUDNN_CHECK(api.BackendExecute(impl_->handle, plan->candidates[i].get(), pack.get()));
      stop.record(stream);
      stop.synchronize();
      const float ms = Event::elapsed_ms(start, stop);
      if (ms < best) {
        best = ms;
        plan->chosen = static_cast<int>(i);
      }
    }
    plan->tuned = true;
    return;
  }
  HYMOE_CUDNN_CHECK(
      api.BackendExecute(impl_->handle, plan->candidates[plan->chosen].get(), pack.get()));
}

int MlaPrefillCudnn::plans() const {
  std::lock_guard lock(impl_->mutex);
  return static_cast<int>(impl_->plans.size());
}

int MlaPrefillCudnn::engines(const MlaPrefillParams& p) {
  check_mla_prefill_params(p, /*pointers=*/false);
  std::lock_guard lock(impl_->mutex);
  const Plan* plan = p.tokens == 0 ? nullptr : impl_->plan_for(p, nullptr);
  return plan ? static_cast<int>(plan->candidates.size()) : 0;
}

double MlaPrefillCudnn::last_build_ms() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->last_build_ms;
}

#else  // built without cuDNN's headers

struct MlaPrefillCudnn::Impl {};

bool MlaPrefillCudnn::available(std::string* why) {
  if (why) *why = "hymoe was built without cuDNN's headers (cudnn_graph.h)";
  return false;
}
MlaPrefillCudnn::MlaPrefillCudnn(MemoryBudget*, bool) {
  HYMOE_THROW(kUnsupported, "cuDNN attention unavailable: built without cuDNN's headers");
}
MlaPrefillCudnn::~MlaPrefillCudnn() = default;
bool MlaPrefillCudnn::supports(const MlaPrefillParams&, std::string* why) { return available(why); }
void MlaPrefillCudnn::run(const MlaPrefillParams&, cudaStream_t) {
  HYMOE_THROW(kUnsupported, "cuDNN attention unavailable: built without cuDNN's headers");
}
int MlaPrefillCudnn::plans() const { return 0; }
int MlaPrefillCudnn::engines(const MlaPrefillParams&) { return 0; }
double MlaPrefillCudnn::last_build_ms() const { return 0.0; }

#endif

}  // namespace hymoe::gpu
