// cuBLASLt GEMM plans. Row-major D = A * B^T is the column-major D^T = B^T(op T) * A^T(op N):
// cuBLASLt's "A" is our B (the weight) and its "B" is our A (the activations). That is the TN
// form Hopper's FP8 kernels require.
#include "hymoe/gpu/gemm.h"

#include <utility>

#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/fp8_block_gemm.h"

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
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool found = false;

  ~Impl() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lt_d) cublasLtMatrixLayoutDestroy(lt_d);
    if (lt_b) cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a) cublasLtMatrixLayoutDestroy(lt_a);
    if (op) cublasLtMatmulDescDestroy(op);
  }

  void build(const CublasLt& lt, GemmKind kind, const GemmShape& s) {
    const bool fp8 = kind != GemmKind::kBf16;
    const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
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
    const size_t workspace = lt.workspace_bytes();
    HYMOE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        lt.get(), op, lt_a, lt_b, lt_d, lt_d, pref, 1, &heuristic, &returned);
    found = status == CUBLAS_STATUS_SUCCESS && returned > 0;
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
    if (impl_->found) {
      backend_ = GemmBackend::kCublasLt;
    } else if (block && (wgmma || backend == GemmBackend::kAuto) &&
               fp8_block_gemm_wgmma_supported()) {
      // kAuto: the warp-specialised kernels, fastest on the H200 (run 27: TMA with the
      // cross-step schedule 37-66% of the FP8 ceiling on the layer shapes, above kWgmmaWsTma on
      // 12 of 16 and within 3 points on the rest; round 1's kWgmma / kWgmma64 20-37%, run 18).
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
  return impl.found;
}

size_t GemmPlan::workspace_bytes() const {
  return impl_ && backend_ == GemmBackend::kCublasLt ? impl_->heuristic.workspaceSize : 0;
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
                                    &impl_->heuristic.algo, workspace, workspace_size,
                                    stream));
}

}  // namespace hymoe::gpu
