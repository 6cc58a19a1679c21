// GEMMs through cuBLASLt, all in one convention: D[m, n] = A[m, k] * B[n, k]^T with every matrix
// row-major (A: activations, B: a checkpoint weight [out, in], D: BF16 output), FP32 accumulation.
//   kBf16:           A, B BF16 (the BF16 ceiling and BF16 projections).
//   kFp8TensorScale: A, B FP8 E4M3 with one FP32 scale each (the FP8 ceiling).
//   kFp8BlockScale:  DeepSeek-V3's block scaling: A FP8 with one scale per token per 128 columns
//                    (cuBLASLt VEC128_32F; scales[kb * m + t], as quantize_fp8_per_token_block
//                    writes them with scale_ld = m) and B FP8 with one scale per 128x128 block
//                    (BLK128x128_32F; the checkpoint's weight_scale_inv [ceil(n/128), ld] with
//                    ld = round_up(ceil(k/128), 4): the checkpoint layout as is when
//                    ceil(k/128) % 4 == 0, true for every DeepSeek-V3 / Kimi-K2 shape).
// cuBLASLt has block scaling on Hopper (sm_90) from CUDA 12.9, but not for every shape (it refused
// an expert of m=35 n=320 k=256 on the H200). Where it has no algorithm for kFp8BlockScale, the
// plan runs hymoe's own kernel (fp8_block_gemm.h) instead: wgmma on Hopper (sm_90a builds),
// mma.sync elsewhere; GemmBackend forces any one. Other kinds without an algorithm throw
// kUnsupported and say so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

enum class GemmKind { kBf16, kFp8TensorScale, kFp8BlockScale };
// kAuto: cuBLASLt where it has an algorithm, else hymoe's kernel (kFp8BlockScale only: where
// fp8_block_gemm_wgmma_supported(), kWgmmaWs64 for m <= 64 else kWgmmaWsTmaC, the fastest on the
// H200; elsewhere kHymoe).
// kHymoe: hymoe's mma.sync kernel; kWgmma / kWgmma64: hymoe's wgmma kernel (sm_90a) with 128- /
// 64-row tiles, loads and promotion in the same warps; kWgmmaWs / kWgmmaWsPipe: its
// warp-specialised persistent variant (128-row tiles; promotion after / under the next block's
// wgmmas), kWgmmaWs64 (64-row tiles, promotion under the next block's wgmmas), kWgmmaWsTma
// (kWgmmaWsPipe with TMA loads; GemmPlan only, not the grouped GEMM), kWgmmaWsTmaGrouped (the
// same for the grouped expert GEMM: one tensor map per expert weight; GroupedFp8Gemm only),
// kWgmmaWsTmaGroupedSt (that one storing its output tile through shared memory, 16-byte stores,
// with kWgmmaWs's promotion after each block's wgmmas: the pipelined one then spills).
// Tile-order and scale-path variants (GroupedFp8Gemm only; none faster than kWgmmaWsTmaGrouped,
// kept for the bench): kWgmmaWsTmaGroupedSc (kWgmmaWsTmaGrouped with each K block's block scales
// copied into the ring by the producer, read from shared memory by the consumers),
// kWgmmaWsTmaGroupedX (kWgmmaWsTmaGrouped in expert-major tile order: an expert's row tiles of one
// column tile consecutive, sharing the weight tile through L2), kWgmmaWsTmaGroupedScX (both),
// kWgmmaWsTmaGroupedScXH (ScX, and a tile of <= 64 rows, an expert's remainder, split by columns
// between the two consumers: 64 x 64 each, half the tensor work of a 128-row tile).
// The cross-step schedule (each consumer issues K block kb + 1's wgmmas before waiting for kb's
// with wgmma.wait_group 1, promotes kb under them, releases kb's slot after that wait):
// kWgmmaWsTmaGroupedC (kWgmmaWsTmaGrouped with it), kWgmmaWsTmaGroupedScC (Sc with it),
// kWgmmaWsTmaGroupedScXC (ScX with it) for GroupedFp8Gemm, kWgmmaWsTmaC (kWgmmaWsTma with it) for
// GemmPlan, where it is the fallback (the fastest dense kernel on 12 of 16 shapes).
// kWgmmaWsTmaGroupedScCM (GroupedFp8Gemm only): ScC in clusters of two CTAs on adjacent column
// tiles of one row tile, each K block's A tile loaded half by each and multicast to both (0-3
// points above ScC).
// kWgmmaWsTmaGroupedScMW (GroupedFp8Gemm only; its kAuto): ScCM's clusters with 128 x 192 tiles
// (m64n192 wgmmas, 17% fewer ring bytes per FLOP; one partial accumulator, so each K block's
// wgmmas are waited for before its promotion, as kWgmmaWsTmaGroupedSc); 1-7% more TFLOP/s than
// ScCM at 4K-64K tokens.
// kWgmmaTmaGroupedTx (GroupedFp8Gemm only): a grouped kernel written to DeepGEMM's plan
// (fp8_grouped_gemm_tx.cuh: 128 x 128 tiles, A, B and the A scales of a K block on one
// transaction barrier, no scale warp); opt-in: level with ScMW at 64K tokens, below it at 4K-16K.
// Figures: H200, docs/experiments.md (block-scaled and grouped expert FP8 GEMM).
enum class GemmBackend {
  kAuto, kCublasLt, kHymoe, kWgmma, kWgmma64, kWgmmaWs, kWgmmaWsPipe, kWgmmaWs64, kWgmmaWsTma,
  kWgmmaWsTmaGrouped, kWgmmaWsTmaGroupedSt, kWgmmaWsTmaGroupedSc, kWgmmaWsTmaGroupedX,
  kWgmmaWsTmaGroupedScX, kWgmmaWsTmaGroupedScXH, kWgmmaWsTmaGroupedC, kWgmmaWsTmaGroupedScC,
  kWgmmaWsTmaGroupedScXC, kWgmmaWsTmaC, kWgmmaWsTmaGroupedScCM, kWgmmaWsTmaGroupedScMW,
  kWgmmaTmaGroupedTx
};

// Whether the backend is one of the grouped expert GEMM's TMA kernels (GroupedFp8Gemm only).
inline bool is_grouped_tma_backend(GemmBackend b) {
  return b == GemmBackend::kWgmmaWsTmaGrouped || b == GemmBackend::kWgmmaWsTmaGroupedSt ||
         b == GemmBackend::kWgmmaWsTmaGroupedSc || b == GemmBackend::kWgmmaWsTmaGroupedX ||
         b == GemmBackend::kWgmmaWsTmaGroupedScX || b == GemmBackend::kWgmmaWsTmaGroupedScXH ||
         b == GemmBackend::kWgmmaWsTmaGroupedC || b == GemmBackend::kWgmmaWsTmaGroupedScC ||
         b == GemmBackend::kWgmmaWsTmaGroupedScXC || b == GemmBackend::kWgmmaWsTmaGroupedScCM ||
         b == GemmBackend::kWgmmaWsTmaGroupedScMW || b == GemmBackend::kWgmmaTmaGroupedTx;
}

// Whether the backend is one of hymoe's wgmma kernels (sm_90a).
inline bool is_wgmma_backend(GemmBackend b) {
  return b == GemmBackend::kWgmma || b == GemmBackend::kWgmma64 || b == GemmBackend::kWgmmaWs ||
         b == GemmBackend::kWgmmaWsPipe || b == GemmBackend::kWgmmaWs64 ||
         b == GemmBackend::kWgmmaWsTma || b == GemmBackend::kWgmmaWsTmaC ||
         is_grouped_tma_backend(b);
}

const char* gemm_kind_name(GemmKind kind);
const char* gemm_backend_name(GemmBackend backend);

struct GemmShape {
  int m = 0;         // rows of A and D (tokens)
  int n = 0;         // rows of B, columns of D (output features)
  int k = 0;         // shared inner dimension (a multiple of 16 for FP8)
  int64_t lda = 0;   // elements between rows of A (>= k)
  int64_t ldb = 0;   // elements between rows of B (>= k)
  int64_t ldd = 0;   // elements between rows of D (>= n)
};

// Leading dimension of the padded weight scale grid of kFp8BlockScale.
inline int64_t block_scale_ld(int k) { return ((k + 127) / 128 + 3) / 4 * 4; }

struct GemmOperands {
  const void* a = nullptr;        // Bf16 or Fp8E4M3 per the kind
  const float* a_scale = nullptr; // FP8 kinds: device scale(s) of A (see the layouts above)
  const void* b = nullptr;
  const float* b_scale = nullptr;
  Bf16* d = nullptr;
};

// Descriptors and the chosen algorithm for one (kind, shape): build once, run many times.
// Not thread-safe (run() sets the scale pointers on its descriptor).
class GemmPlan {
 public:
  // Throws kUnsupported when the requested backend cannot run the kind and shape on this device,
  // kInvalidArgument for bad shapes (or hymoe's kernels with a kind other than kFp8BlockScale).
  GemmPlan(const CublasLt& lt, GemmKind kind, const GemmShape& shape,
           GemmBackend backend = GemmBackend::kAuto);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  GemmPlan(GemmPlan&& other) noexcept;
  GemmPlan& operator=(GemmPlan&&) = delete;

  void run(const GemmOperands& ops, cudaStream_t stream);
  // The same on a caller-owned cuBLASLt workspace of at least workspace_bytes(): plans that run
  // concurrently on several streams must not share the handle's one workspace.
  void run(const GemmOperands& ops, cudaStream_t stream, void* workspace, size_t workspace_bytes);
  // The workspace the cuBLASLt algorithm needs (0 for hymoe's own kernels).
  size_t workspace_bytes() const;

  GemmKind kind() const { return kind_; }
  // The backend chosen: kCublasLt, kHymoe or one of the wgmma ones.
  GemmBackend backend() const { return backend_; }
  const GemmShape& shape() const { return shape_; }
  double flops() const { return 2.0 * shape_.m * double(shape_.n) * shape_.k; }
  // Whether cuBLASLt has an algorithm for this kind and shape on the current device.
  static bool supported(const CublasLt& lt, GemmKind kind, const GemmShape& shape);

  // cuBLASLt's candidate algorithms for this plan (0 for hymoe's kernels): its heuristic's
  // answers, best guess first (up to kGemmHeuristicAlgos), then each of those that splits K,
  // again with 2, 3 and 4 splits where cuBLASLt accepts that for the shape and the handle's
  // workspace. run() uses candidate algo(): 0, the heuristic's first, until use_algo() or tune()
  // picks another.
  static constexpr int kGemmHeuristicAlgos = 16;
  int algo_count() const;
  int algo() const;
  void use_algo(int index);  // kInvalidArgument outside [0, algo_count())
  // Adds cuBLASLt's other configurations to the candidates: every algorithm id for these types,
  // each of its tiles and stage counts, K unsplit and in 2 and 4 where it splits, that cuBLASLt's
  // check accepts within the workspace, up to `limit` candidates in all (tune() then times them
  // all: worth it for a plan built once and run many times). Returns how many it added (0 for
  // hymoe's kernels).
  int widen(int limit = 256);
  // Candidate `index` in cuBLASLt's terms (algorithm id, tile, stages, split-K, cluster), for logs.
  std::string algo_description(int index) const;
  // Times every candidate on these operands (one warm-up launch, then `reps` launches between two
  // events on `stream`; d is overwritten) and keeps the fastest. Returns each candidate's mean ms
  // (index = candidate; empty for hymoe's kernels, which have nothing to tune). Synchronises the
  // stream. A candidate that fails to launch is skipped (its time: +infinity).
  std::vector<double> tune(const GemmOperands& ops, cudaStream_t stream, int reps = 10);

 private:
  struct Impl;
  const CublasLt* lt_;
  GemmKind kind_;
  GemmShape shape_;
  GemmBackend backend_ = GemmBackend::kCublasLt;
  Impl* impl_ = nullptr;
};

}  // namespace hymoe::gpu
