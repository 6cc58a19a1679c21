// cuBLASLt GEMM plans. Row-major D = A * B^T is the column-major D^T = B^T(op T) * A^T(op N):
// cuBLASLt's "A" is our B (the weight) and its "B" is our A (the activations). That is the TN
// form Hopper's FP8 kernels require.
#include "hymoe/gpu/gemm.h"

#include <array>
#include <limits>
#include <utility>

#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/stream.h"

namespace hymoe::gpu {

const char* gemm_kind_name(GemmKind kind) {
  switch (kind) {
    case GemmKind::kBf16: return "bf16";
    case GemmKind::kFp8TensorScale: return "fp8-tensor-scale";
    case GemmKind::kFp8BlockScale: return "fp8-block-scale";
  }
  return "unknown";
}

const char* gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kAuto: return "auto";
    case GemmBackend::kCublasLt: return "cublaslt";
    case GemmBackend::kHymoe: return "hymoe";
    case GemmBackend::kWgmma: return "wgmma";
    case GemmBackend::kWgmma64: return "wgmma64";
    case GemmBackend::kWgmmaWs: return "wgmma_ws";
    case GemmBackend::kWgmmaWsPipe: return "wgmma_ws_pipe";
    case GemmBackend::kWgmmaWs64: return "wgmma_ws64";
    case GemmBackend::kWgmmaWsTma: return "wgmma_ws_tma";
    case GemmBackend::kWgmmaWsTmaGrouped: return "wgmma_ws_tma_grouped";
    case GemmBackend::kWgmmaWsTmaGroupedSt: return "wgmma_ws_tma_grouped_st";
    case GemmBackend::kWgmmaWsTmaGroupedSc: return "wgmma_ws_tma_grouped_sc";
    case GemmBackend::kWgmmaWsTmaGroupedX: return "wgmma_ws_tma_grouped_x";
    case GemmBackend::kWgmmaWsTmaGroupedScX: return "wgmma_ws_tma_grouped_scx";
    case GemmBackend::kWgmmaWsTmaGroupedScXH: return "wgmma_ws_tma_grouped_scxh";
    case GemmBackend::kWgmmaWsTmaGroupedC: return "wgmma_ws_tma_grouped_c";
    case GemmBackend::kWgmmaWsTmaGroupedScC: return "wgmma_ws_tma_grouped_scc";
    case GemmBackend::kWgmmaWsTmaGroupedScXC: return "wgmma_ws_tma_grouped_scxc";
    case GemmBackend::kWgmmaWsTmaC: return "wgmma_ws_tma_c";
    case GemmBackend::kWgmmaWsTmaGroupedScCM: return "wgmma_ws_tma_grouped_sccm";
    case GemmBackend::kWgmmaWsTmaGroupedScMW: return "wgmma_ws_tma_grouped_scmw";
    case GemmBackend::kWgmmaTmaGroupedTx: return "wgmma_tma_grouped_tx";
  }
  return "unknown";
}

struct GemmPlan::Impl {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr;  // cuBLASLt A = our B (weight), k x n column-major
  cublasLtMatrixLayout_t lt_b = nullptr;  // cuBLASLt B = our A (activations), k x m column-major
  cublasLtMatrixLayout_t lt_d = nullptr;  // n x m column-major = D row-major [m, n]
  cublasLtMatmulPreference_t pref = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;  // the candidates (GemmPlan::algo_count)
  int chosen = 0;
  cudaDataType_t in_type = CUDA_R_16BF;
  size_t workspace = 0;

  bool found() const { return !algos.empty(); }
  const cublasLtMatmulHeuristicResult_t& algo() const { return algos[chosen]; }

  ~Impl() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lt_d) cublasLtMatrixLayoutDestroy(lt_d);
    if (lt_b) cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a) cublasLtMatrixLayoutDestroy(lt_a);
    if (op) cublasLtMatmulDescDestroy(op);
  }

  void build(const CublasLt& lt, GemmKind kind, const GemmShape& s) {
    const bool fp8 = kind != GemmKind::kBf16;
    in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    HYMOE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                      sizeof(trans_a)));
    HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                      sizeof(trans_b)));
    if (kind == GemmKind::kFp8BlockScale) {
      const cublasLtMatmulMatrixScale_t weight_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      const cublasLtMatmulMatrixScale_t act_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                        &weight_mode, sizeof(weight_mode)));
      HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                        &act_mode, sizeof(act_mode)));
    }
    if (fp8) {
      // Placeholder scale pointers for the heuristic query; run() sets the real ones.
      const void* dummy = lt.workspace();
      HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                        &dummy, sizeof(dummy)));
      HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                        &dummy, sizeof(dummy)));
    }
    HYMOE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt_a, in_type, s.k, s.n, s.ldb));
    HYMOE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt_b, in_type, s.k, s.m, s.lda));
    HYMOE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt_d, CUDA_R_16BF, s.n, s.m, s.ldd));
    HYMOE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    workspace = lt.workspace_bytes();
    HYMOE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    cublasLtMatmulHeuristicResult_t results[GemmPlan::kGemmHeuristicAlgos] = {};
    int returned = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt.get(), op, lt_a, lt_b, lt_d, lt_d, pref,
                                       GemmPlan::kGemmHeuristicAlgos, results,
                                       &returned) != CUBLAS_STATUS_SUCCESS)
      returned = 0;
    for (int i = 0; i < returned; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS) algos.push_back(results[i]);
    add_split_k(lt);
  }

  // A configuration's (id, tile, stages, split-K): GemmPlan::widen's duplicate test.
  static std::array<int64_t, 4> key(const cublasLtMatmulAlgo_t& a) {
    std::array<int64_t, 4> k{};
    const cublasLtMatmulAlgoConfigAttributes_t attrs[] = {
        CUBLASLT_ALGO_CONFIG_ID, CUBLASLT_ALGO_CONFIG_TILE_ID, CUBLASLT_ALGO_CONFIG_STAGES_ID,
        CUBLASLT_ALGO_CONFIG_SPLITK_NUM};
    for (size_t i = 0; i < k.size(); ++i) {
      uint32_t v = 0;
      size_t written = 0;
      k[i] = cublasLtMatmulAlgoConfigGetAttribute(&a, attrs[i], &v, sizeof(v), &written) ==
                     CUBLAS_STATUS_SUCCESS
                 ? v
                 : -1;
    }
    return k;
  }

  // The list of a capability attribute (tile or stage ids); {0} (undefined: cuBLASLt's choice)
  // when the algorithm has none.
  static std::vector<uint32_t> cap_list(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
    size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
        bytes < sizeof(uint32_t))
      return {0};
    std::vector<uint32_t> v(bytes / sizeof(uint32_t));
    if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, v.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS)
      return {0};
    return v;
  }

  // Appends `r` with `splits` splits of K (reduction in the first scheme the algorithm supports
  // of: the compute type, the output type, in place) if cuBLASLt's check accepts it within the
  // workspace; false where it does not.
  bool add_checked(const CublasLt& lt, cublasLtMatmulHeuristicResult_t r, uint32_t splits) {
    if (splits > 1) {
      uint32_t schemes = 0, scheme = 0;
      size_t written = 0;
      if (cublasLtMatmulAlgoCapGetAttribute(&r.algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK,
                                            &schemes, sizeof(schemes), &written) != CUBLAS_STATUS_SUCCESS)
        return false;
      for (const uint32_t sc : {uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE},
                                uint32_t{CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE},
                                uint32_t{CUBLASLT_REDUCTION_SCHEME_INPLACE}})
        if (scheme == 0 && (schemes & sc) != 0) scheme = sc;
      if (scheme == 0 ||
          cublasLtMatmulAlgoConfigSetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                               &scheme, sizeof(scheme)) != CUBLAS_STATUS_SUCCESS)
        return false;
    }
    cublasLtMatmulHeuristicResult_t checked{};
    if (cublasLtMatmulAlgoConfigSetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                             sizeof(splits)) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoCheck(lt.get(), op, lt_a, lt_b, lt_d, lt_d, &r.algo, &checked) !=
            CUBLAS_STATUS_SUCCESS ||
        checked.workspaceSize > workspace)
      return false;
    r.workspaceSize = checked.workspaceSize;
    r.wavesCount = checked.wavesCount;
    r.state = CUBLAS_STATUS_SUCCESS;
    algos.push_back(r);
    return true;
  }

  // Each heuristic answer that does not split K, again with 2, 3 and 4 splits where cuBLASLt
  // accepts them.
  void add_split_k(const CublasLt& lt) {
    const size_t heuristic = algos.size();
    for (size_t i = 0; i < heuristic; ++i) {
      const cublasLtMatmulHeuristicResult_t base = algos[i];
      int32_t support = 0;
      uint32_t splits_now = 1;
      size_t written = 0;
      if (cublasLtMatmulAlgoCapGetAttribute(&base.algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &support,
                                            sizeof(support), &written) != CUBLAS_STATUS_SUCCESS ||
          support == 0 ||
          cublasLtMatmulAlgoConfigGetAttribute(&base.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                               &splits_now, sizeof(splits_now),
                                               &written) != CUBLAS_STATUS_SUCCESS ||
          splits_now > 1)
        continue;
      for (const uint32_t splits : {2u, 3u, 4u}) add_checked(lt, base, splits);
    }
  }

  // GemmPlan::widen: every algorithm id for these types, each of its tiles and stage counts,
  // K unsplit and (where it splits) in 2 and 4, that cuBLASLt's check accepts and the list does
  // not hold yet, up to `limit` candidates in all.
  int widen(const CublasLt& lt, int limit) {
    const size_t before = algos.size();
    std::vector<std::array<int64_t, 4>> seen;
    for (const auto& r : algos) seen.push_back(key(r.algo));
    int ids[128];
    int n_ids = 0;
    if (cublasLtMatmulAlgoGetIds(lt.get(), CUBLAS_COMPUTE_32F, CUDA_R_32F, in_type, in_type,
                                 CUDA_R_16BF, CUDA_R_16BF, 128, ids, &n_ids) != CUBLAS_STATUS_SUCCESS)
      return 0;
    for (int i = 0; i < n_ids; ++i) {
      cublasLtMatmulHeuristicResult_t r{};
      if (cublasLtMatmulAlgoInit(lt.get(), CUBLAS_COMPUTE_32F, CUDA_R_32F, in_type, in_type,
                                 CUDA_R_16BF, CUDA_R_16BF, ids[i], &r.algo) != CUBLAS_STATUS_SUCCESS)
        continue;
      int32_t split_support = 0;
      size_t written = 0;
      if (cublasLtMatmulAlgoCapGetAttribute(&r.algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT,
                                            &split_support, sizeof(split_support),
                                            &written) != CUBLAS_STATUS_SUCCESS)
        split_support = 0;
      for (const uint32_t tile : cap_list(r.algo, CUBLASLT_ALGO_CAP_TILE_IDS))
        for (const uint32_t stages : cap_list(r.algo, CUBLASLT_ALGO_CAP_STAGES_IDS))
          for (const uint32_t splits : {1u, 2u, 4u}) {
            if ((splits > 1 && split_support == 0) || static_cast<int>(algos.size()) >= limit)
              continue;
            cublasLtMatmulHeuristicResult_t c = r;
            if (cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                     sizeof(tile)) != CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                                     &stages, sizeof(stages)) != CUBLAS_STATUS_SUCCESS)
              continue;
            uint32_t one = 1;  // key() of the unsplit configuration reads 1
            (void)cublasLtMatmulAlgoConfigSetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                       &one, sizeof(one));
            auto k = key(c.algo);
            k[3] = splits;
            bool dup = false;
            for (const auto& s : seen) dup = dup || s == k;
            if (dup || !add_checked(lt, c, splits)) continue;
            seen.push_back(k);
          }
    }
    return static_cast<int>(algos.size() - before);
  }
};

namespace {

void check_shape(GemmKind kind, const GemmShape& s) {
  HYMOE_CHECK(s.m >= 1 && s.n >= 1 && s.k >= 1 && s.lda >= s.k && s.ldb >= s.k && s.ldd >= s.n,
              kInvalidArgument, "gemm {}: bad shape m={} n={} k={} lda={} ldb={} ldd={}",
              gemm_kind_name(kind), s.m, s.n, s.k, s.lda, s.ldb, s.ldd);
  if (kind != GemmKind::kBf16) {
    HYMOE_CHECK(s.k % 16 == 0 && s.lda % 16 == 0 && s.ldb % 16 == 0, kInvalidArgument,
                "gemm {}: FP8 needs k, lda, ldb multiples of 16 (k={} lda={} ldb={})",
                gemm_kind_name(kind), s.k, s.lda, s.ldb);
  }
}

}  // namespace

GemmPlan::GemmPlan(const CublasLt& lt, GemmKind kind, const GemmShape& shape, GemmBackend backend)
    : lt_(&lt), kind_(kind), shape_(shape) {
  check_shape(kind, shape);
  const bool wgmma = is_wgmma_backend(backend);
  const bool own = backend == GemmBackend::kHymoe || wgmma;
  HYMOE_CHECK(!own || kind == GemmKind::kFp8BlockScale, kInvalidArgument,
              "gemm {}: hymoe's own kernel is block-scaled FP8 only", gemm_kind_name(kind));
  HYMOE_CHECK(!is_grouped_tma_backend(backend), kInvalidArgument,
              "gemm: {} is the grouped expert GEMM's backend (GroupedFp8Gemm)",
              gemm_backend_name(backend));
  impl_ = new Impl;
  try {
    if (!own) impl_->build(lt, kind, shape);
    const bool block = kind == GemmKind::kFp8BlockScale;
    if (impl_->found()) {
      backend_ = GemmBackend::kCublasLt;
    } else if (block && (wgmma || backend == GemmBackend::kAuto) &&
               fp8_block_gemm_wgmma_supported()) {
      // kAuto: the warp-specialised kernels, fastest on the H200 (TMA with the cross-step
      // schedule 37-66% of the FP8 ceiling on the layer shapes, above kWgmmaWsTma on 12 of 16
      // and within 3 points on the rest; kWgmma / kWgmma64 20-37%).
      backend_ = wgmma ? backend
                 : shape.m <= 64 ? GemmBackend::kWgmmaWs64
                                 : GemmBackend::kWgmmaWsTmaC;
    } else if (block && (backend == GemmBackend::kHymoe || backend == GemmBackend::kAuto) &&
               fp8_block_gemm_supported()) {
      backend_ = GemmBackend::kHymoe;
    } else {
      int device = 0;
      cudaDeviceProp prop{};
      HYMOE_CUDA_CHECK(cudaGetDevice(&device));
      HYMOE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
      HYMOE_THROW(kUnsupported, "no {} GEMM for m={} n={} k={} on {} (sm_{}{}) with backend {}",
                  gemm_kind_name(kind), shape.m, shape.n, shape.k, prop.name, prop.major,
                  prop.minor, gemm_backend_name(backend));
    }
  } catch (...) {
    delete impl_;
    throw;
  }
}

GemmPlan::~GemmPlan() { delete impl_; }

GemmPlan::GemmPlan(GemmPlan&& other) noexcept
    : lt_(other.lt_), kind_(other.kind_), shape_(other.shape_), backend_(other.backend_),
      impl_(std::exchange(other.impl_, nullptr)) {}

bool GemmPlan::supported(const CublasLt& lt, GemmKind kind, const GemmShape& shape) {
  check_shape(kind, shape);
  Impl impl;
  impl.build(lt, kind, shape);
  return impl.found();
}

size_t GemmPlan::workspace_bytes() const {
  return impl_ && backend_ == GemmBackend::kCublasLt ? impl_->algo().workspaceSize : 0;
}

int GemmPlan::algo_count() const {
  return impl_ && backend_ == GemmBackend::kCublasLt ? static_cast<int>(impl_->algos.size()) : 0;
}

int GemmPlan::algo() const { return impl_ ? impl_->chosen : 0; }

void GemmPlan::use_algo(int index) {
  HYMOE_CHECK(index >= 0 && index < algo_count(), kInvalidArgument,
              "gemm: algorithm {} of {} ({} backend)", index, algo_count(),
              gemm_backend_name(backend_));
  impl_->chosen = index;
}

int GemmPlan::widen(int limit) {
  if (algo_count() == 0) return 0;
  return impl_->widen(*lt_, limit);
}

std::string GemmPlan::algo_description(int index) const {
  HYMOE_CHECK(index >= 0 && index < algo_count(), kInvalidArgument,
              "gemm: algorithm {} of {} ({} backend)", index, algo_count(),
              gemm_backend_name(backend_));
  const cublasLtMatmulHeuristicResult_t& r = impl_->algos[static_cast<size_t>(index)];
  auto config = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t v = 0;  // (ID is int32_t: the same bytes for the ids cuBLASLt uses)
    size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&r.algo, attr, &v, sizeof(v), &written) ==
                   CUBLAS_STATUS_SUCCESS
               ? static_cast<int64_t>(v)
               : int64_t{-1};
  };
  return fmt::format("id {} tile {} stages {} split-k {} cluster {} swizzle {} workspace {}",
                     config(CUBLASLT_ALGO_CONFIG_ID), config(CUBLASLT_ALGO_CONFIG_TILE_ID),
                     config(CUBLASLT_ALGO_CONFIG_STAGES_ID),
                     config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                     config(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                     config(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), r.workspaceSize);
}

std::vector<double> GemmPlan::tune(const GemmOperands& ops, cudaStream_t stream, int reps) {
  HYMOE_CHECK(reps >= 1, kInvalidArgument, "gemm tune: reps {} < 1", reps);
  std::vector<double> ms;
  if (algo_count() == 0) return ms;
  Event start, end;
  int best = impl_->chosen;
  double best_ms = std::numeric_limits<double>::infinity();
  for (int i = 0; i < algo_count(); ++i) {
    impl_->chosen = i;
    double t = std::numeric_limits<double>::infinity();
    try {
      run(ops, stream);  // warm-up (and any first-launch cost)
      start.record(stream);
      for (int r = 0; r < reps; ++r) run(ops, stream);
      end.record(stream);
      end.synchronize();
      t = Event::elapsed_ms(start, end) / reps;
    } catch (const Error&) {
      // cuBLASLt refused this candidate at launch: leave it out.
    }
    ms.push_back(t);
    if (t < best_ms) {
      best_ms = t;
      best = i;
    }
  }
  impl_->chosen = best;
  return ms;
}

void GemmPlan::run(const GemmOperands& ops, cudaStream_t stream) {
  run(ops, stream, lt_->workspace(), lt_->workspace_bytes());
}

void GemmPlan::run(const GemmOperands& ops, cudaStream_t stream, void* workspace,
                   size_t workspace_size) {
  HYMOE_CHECK(workspace_size >= workspace_bytes() && (workspace || workspace_size == 0),
              kInvalidArgument, "gemm: workspace of {} bytes, the algorithm needs {}",
              workspace_size, workspace_bytes());
  HYMOE_CHECK(impl_ && ops.a && ops.b && ops.d, kInvalidArgument, "gemm: null operand");
  if (kind_ != GemmKind::kBf16) {
    HYMOE_CHECK(ops.a_scale && ops.b_scale, kInvalidArgument, "gemm {}: null scale",
                gemm_kind_name(kind_));
    if (backend_ == GemmBackend::kHymoe || is_wgmma_backend(backend_)) {
      const GemmShape& s = shape_;
      fp8_block_gemm({static_cast<const Fp8E4M3*>(ops.a), ops.a_scale,
                      static_cast<const Fp8E4M3*>(ops.b), ops.b_scale, ops.d, s.m, s.n, s.k, s.lda,
                      s.ldb, s.ldd, s.m, block_scale_ld(s.k)},
                     stream,
                     backend_ == GemmBackend::kWgmma     ? Fp8BlockGemmKernel::kWgmma
                     : backend_ == GemmBackend::kWgmma64 ? Fp8BlockGemmKernel::kWgmma64
                     : backend_ == GemmBackend::kWgmmaWs ? Fp8BlockGemmKernel::kWgmmaWs
                     : backend_ == GemmBackend::kWgmmaWsPipe ? Fp8BlockGemmKernel::kWgmmaWsPipe
                     : backend_ == GemmBackend::kWgmmaWs64 ? Fp8BlockGemmKernel::kWgmmaWs64
                     : backend_ == GemmBackend::kWgmmaWsTma ? Fp8BlockGemmKernel::kWgmmaWsTma
                     : backend_ == GemmBackend::kWgmmaWsTmaC ? Fp8BlockGemmKernel::kWgmmaWsTmaCross
                                                         : Fp8BlockGemmKernel::kMmaSync);
      return;
    }
    // cuBLASLt's A is our weight B, its B our activations A.
    const float* weight_scale = ops.b_scale;
    const float* act_scale = ops.a_scale;
    HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        impl_->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &weight_scale, sizeof(weight_scale)));
    HYMOE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        impl_->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &act_scale, sizeof(act_scale)));
  }
  const float alpha = 1.0f, beta = 0.0f;
  HYMOE_CUBLAS_CHECK(cublasLtMatmul(lt_->get(), impl_->op, &alpha, ops.b, impl_->lt_a, ops.a,
                                    impl_->lt_b, &beta, ops.d, impl_->lt_d, ops.d, impl_->lt_d,
                                    &impl_->algo().algo, workspace, workspace_size,
                                    stream));
}

}  // namespace hymoe::gpu
