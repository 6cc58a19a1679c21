// Entry points of the MoE dispatch kernels and the grouped expert GEMM.
#include "hymoe/gpu/moe.h"

#include <algorithm>

#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/upload.h"
#include "kernel_launch.h"

namespace hymoe::gpu {
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void moe_expert_offsets(const MoeOffsetsParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.top_k >= 1 && p.experts >= 1 && p.experts <= kMoeMaxExperts &&
                  p.top_k <= p.experts,
              kInvalidArgument, "moe offsets: tokens {} top_k {} experts {}", p.tokens, p.top_k,
              p.experts);
  HYMOE_CHECK(p.expert_offsets && p.cursor && (p.tokens == 0 || (p.topk_ids && p.slot_rows)),
              kInvalidArgument, "moe offsets: null pointer");
  HYMOE_CUDA_CHECK(launch::moe_expert_offsets(p, stream));
}

void moe_permute_fp8(const MoePermuteParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.top_k >= 1 && p.cols >= 16 && p.cols % 16 == 0 &&
                  p.x_scale_ld >= p.tokens,
              kInvalidArgument, "moe permute: tokens {} top_k {} cols {} scale_ld {}", p.tokens,
              p.top_k, p.cols, p.x_scale_ld);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.x && p.x_scales && p.topk_ids && p.slot_rows && p.expert_offsets && p.out &&
                  p.out_scales,
              kInvalidArgument, "moe permute: null pointer");
  HYMOE_CHECK(aligned16(p.x) && aligned16(p.out), kInvalidArgument,
              "moe permute: rows must be 16-byte aligned");
  HYMOE_CHECK(int64_t{p.tokens} * p.top_k < 0x7fffffff, kInvalidArgument,
              "moe permute: too many rows");
  HYMOE_CUDA_CHECK(launch::moe_permute_fp8(p, stream));
}

void moe_unpermute_add(const MoeUnpermuteAddParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.top_k >= 1 && p.cols >= 8 && p.cols % 8 == 0 && p.ldy >= p.cols && p.ldy % 8 == 0 &&
                  p.ldo >= p.cols && p.ldo % 4 == 0 && p.expert_begin >= 0 && p.expert_begin <= p.expert_end &&
                  p.row_begin >= 0,
              kInvalidArgument, "moe unpermute-add: tokens {} top_k {} cols {} ld {},{} experts [{}, {}) row {}",
              p.tokens, p.top_k, p.cols, p.ldy, p.ldo, p.expert_begin, p.expert_end, p.row_begin);
  if (p.tokens == 0 || p.expert_begin == p.expert_end) return;
  HYMOE_CHECK(p.y && p.slot_rows && p.topk_ids && p.topk_weights && p.out, kInvalidArgument,
              "moe unpermute-add: null pointer");
  HYMOE_CHECK(aligned16(p.y), kInvalidArgument, "moe unpermute-add: rows must be 16-byte aligned");
  HYMOE_CUDA_CHECK(launch::moe_unpermute_add(p, stream));
}

void moe_unpermute(const MoeUnpermuteParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.top_k >= 1 && p.cols >= 8 &&
                  p.cols % 8 == 0 && p.ldy >= p.cols && p.ldy % 8 == 0 && p.ldo >= p.cols &&
                  p.ldo % 8 == 0,
              kInvalidArgument, "moe unpermute: tokens {} top_k {} cols {} ld {},{}",
              p.tokens, p.top_k, p.cols, p.ldy, p.ldo);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.y && p.slot_rows && p.topk_weights && p.out, kInvalidArgument,
              "moe unpermute: null pointer");
  HYMOE_CHECK(aligned16(p.y) && aligned16(p.out), kInvalidArgument,
              "moe unpermute: rows must be 16-byte aligned");
  HYMOE_CUDA_CHECK(launch::moe_unpermute(p, stream));
}

GroupedFp8Gemm::GroupedFp8Gemm(const CublasLt& lt, int n, int k, GemmBackend backend)
    : lt_(&lt), n_(n), k_(k), backend_(backend) {
  HYMOE_CHECK(n >= 1 && k >= 16 && k % 16 == 0, kInvalidArgument,
              "grouped gemm: n {} k {} (k a multiple of 16)", n, k);
  if (backend_ == GemmBackend::kAuto) {
    // The warp-specialised TMA kernel with the block scales in the ring and the cross-step
    // schedule (ScC, above every earlier variant), in 2-CTA clusters sharing each A tile (ScCM),
    // with 128 x 192 tiles (ScMW: 2-7% / 3-4% / 3-6% more TFLOP/s than ScCM at 4K / 16K / 64K
    // tokens). Timed in the GPU's steady state beside a ceiling timed the same way (H200), ScMW
    // reads 45-46 / 67-68 / 74-75% of the FP8 ceiling for a DeepSeek-V3 layer, the DeepGEMM-plan
    // kernel Tx 42-43 / 63 / 70-71% (docs/experiments.md, grouped expert FP8 GEMM).
    backend_ = fp8_block_gemm_wgmma_supported() ? GemmBackend::kWgmmaWsTmaGroupedScMW
               : fp8_block_gemm_supported()     ? GemmBackend::kHymoe
                                                : GemmBackend::kCublasLt;
  }
  HYMOE_CHECK(backend_ != GemmBackend::kHymoe || fp8_block_gemm_supported(), kUnsupported,
              "grouped gemm: hymoe's kernel needs FP8 tensor cores (compute capability 8.9+)");
  HYMOE_CHECK(backend_ != GemmBackend::kWgmmaWsTma && backend_ != GemmBackend::kWgmmaWsTmaC,
              kInvalidArgument,
              "grouped gemm: {} is dense only (one weight pointer per expert)",
              gemm_backend_name(backend_));
  HYMOE_CHECK(!is_wgmma_backend(backend_) || fp8_block_gemm_wgmma_supported(),
              kUnsupported,
              "grouped gemm: the wgmma kernel needs compute capability 9.0 and a build with CUDA "
              "architecture 90a");
}

namespace {
// The launch variant of a grouped TMA backend.
launch::GroupedTmaVariant grouped_tma_variant(GemmBackend b) {
  return b == GemmBackend::kWgmmaWsTmaGroupedSt   ? launch::GroupedTmaVariant::kSmemStore
      : b == GemmBackend::kWgmmaWsTmaGroupedSc ? launch::GroupedTmaVariant::kSmemScales
      : b == GemmBackend::kWgmmaWsTmaGroupedX  ? launch::GroupedTmaVariant::kExpertMajor
      : b == GemmBackend::kWgmmaWsTmaGroupedScX
          ? launch::GroupedTmaVariant::kSmemScalesExpertMajor
      : b == GemmBackend::kWgmmaWsTmaGroupedScXH
          ? launch::GroupedTmaVariant::kSmemScalesExpertMajorSplit64
      : b == GemmBackend::kWgmmaWsTmaGroupedC ? launch::GroupedTmaVariant::kCross
      : b == GemmBackend::kWgmmaWsTmaGroupedScC
          ? launch::GroupedTmaVariant::kSmemScalesCross
      : b == GemmBackend::kWgmmaWsTmaGroupedScXC
          ? launch::GroupedTmaVariant::kSmemScalesExpertMajorCross
      : b == GemmBackend::kWgmmaWsTmaGroupedScCM
          ? launch::GroupedTmaVariant::kSmemScalesCrossMulticast
      : b == GemmBackend::kWgmmaWsTmaGroupedScMW
          ? launch::GroupedTmaVariant::kSmemScalesMulticastWide
      : b == GemmBackend::kWgmmaTmaGroupedTx ? launch::GroupedTmaVariant::kTx
          : launch::GroupedTmaVariant::kPlain;
}
}  // namespace

void GroupedFp8Gemm::run_tma(std::span<const int32_t> host_offsets,
                             std::span<const ExpertWeight> experts, const GroupedGemmParams& gp,
                             int tiles, cudaStream_t stream) {
  const size_t bytes = experts.size() * kTensorMapBytes;
  if (maps_dev_.bytes() < bytes) {
    maps_dev_ = DeviceBuffer(bytes);
    map_table_.invalidate();
  }
  if (maps_host_.size() != experts.size()) maps_host_.resize(experts.size());
  const std::span<const int> stale = map_table_.stale(
      host_offsets, experts.size(), [&](size_t e) -> const void* { return experts[e].w; });
  const launch::GroupedTmaVariant variant = grouped_tma_variant(backend_);
  const int box_rows = launch::grouped_tma_tile_n(variant);
  for (const int e : stale) {
    const cudaError_t err =
        launch::encode_expert_weight_map(maps_host_[e], experts[e].w, n_, k_, box_rows);
    if (err != cudaSuccess) map_table_.invalidate();
    HYMOE_CHECK(err == cudaSuccess, kUnsupported,
                "grouped gemm: no tensor map for expert {} ({}; cuTensorMapEncodeTiled)", e,
                cudaGetErrorString(err));
  }
  // The stale maps' runs in the launches' parameters (read during the call, so the next run may
  // re-encode slots while this launch is still queued; no copy engine: upload.h says why).
  for (size_t i = 0; i < stale.size();) {
    size_t j = i + 1;
    while (j < stale.size() && stale[j] == stale[j - 1] + 1) ++j;
    const auto first = static_cast<size_t>(stale[i]);
    upload_inline(static_cast<char*>(maps_dev_.data()) + first * kTensorMapBytes, &maps_host_[first],
                  (j - i) * kTensorMapBytes, stream);
    i = j;
  }
  HYMOE_CUDA_CHECK(launch::fp8_grouped_gemm_tma(gp, static_cast<const TensorMapBytes*>(maps_dev_.data()),
                                                host_offsets.back(), tiles, variant, stream));
}

void GroupedFp8Gemm::run(std::span<const int32_t> host_offsets, const int32_t* device_offsets,
                         std::span<const ExpertWeight> experts, const Fp8E4M3* a,
                         const float* a_scales, Bf16* d, int64_t ldd, cudaStream_t stream) {
  HYMOE_CHECK(host_offsets.size() == experts.size() + 1, kInvalidArgument,
              "grouped gemm: {} offsets for {} experts", host_offsets.size(), experts.size());
  const int col_blocks = (k_ + 127) / 128;
  HYMOE_CHECK(ldd % 8 == 0 && ldd >= n_ && (reinterpret_cast<uintptr_t>(d) & 15u) == 0 &&
                  (reinterpret_cast<uintptr_t>(a) & 15u) == 0 &&
                  (reinterpret_cast<uintptr_t>(a_scales) & 15u) == 0,
              kInvalidArgument, "grouped gemm: operands must be 16-byte aligned (ldd {})", ldd);
  const bool own = backend_ == GemmBackend::kHymoe || is_wgmma_backend(backend_);
  const Fp8BlockGemmKernel kernel = backend_ == GemmBackend::kWgmma     ? Fp8BlockGemmKernel::kWgmma
                                    : backend_ == GemmBackend::kWgmma64 ? Fp8BlockGemmKernel::kWgmma64
                                    : backend_ == GemmBackend::kWgmmaWs ? Fp8BlockGemmKernel::kWgmmaWs
                                    : backend_ == GemmBackend::kWgmmaWsPipe
                                        ? Fp8BlockGemmKernel::kWgmmaWsPipe
                                    : backend_ == GemmBackend::kWgmmaWs64
                                        ? Fp8BlockGemmKernel::kWgmmaWs64
                                                                        : Fp8BlockGemmKernel::kMmaSync;
  const bool tma = is_grouped_tma_backend(backend_);  // (kWgmmaWsPipe's tiles)
  const int tile_rows =
      launch::fp8_grouped_gemm_tile_rows(tma ? Fp8BlockGemmKernel::kWgmmaWsPipe : kernel);
  int64_t tiles = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    const int rows = host_offsets[e + 1] - host_offsets[e];
    HYMOE_CHECK(rows >= 0, kInvalidArgument, "grouped gemm: offsets decrease at expert {}", e);
    if (rows > 0) {
      HYMOE_CHECK(experts[e].w && experts[e].scales &&
                      (reinterpret_cast<uintptr_t>(experts[e].w) & 15u) == 0,
                  kInvalidArgument, "grouped gemm: expert {} weight null or not 16-byte aligned", e);
    }
    tiles += (rows + tile_rows - 1) / tile_rows;
  }
  if (tiles == 0) return;
  if (own) {
    HYMOE_CHECK(device_offsets, kInvalidArgument, "grouped gemm: device offsets are required");
    HYMOE_CHECK(tiles <= 65535, kInvalidArgument, "grouped gemm: {} row tiles in one launch",
                tiles);
    // The expert table on the device, refreshed only when the experts change.
    if (weights_host_.size() != experts.size() ||
        !std::equal(experts.begin(), experts.end(), weights_host_.begin(),
                    [](const ExpertWeight& x, const ExpertWeight& y) {
                      return x.w == y.w && x.scales == y.scales;
                    })) {
      weights_host_.assign(experts.begin(), experts.end());
      if (weights_dev_.bytes() < experts.size() * sizeof(ExpertWeight))
        weights_dev_ = DeviceBuffer(experts.size() * sizeof(ExpertWeight));
      upload_inline(weights_dev_.data(), weights_host_.data(), experts.size() * sizeof(ExpertWeight), stream);
    }
    GroupedGemmParams gp;
    gp.a = a;
    gp.a_scales = a_scales;
    gp.offsets = device_offsets;
    gp.weights = weights_dev_.as<ExpertWeight>();
    gp.d = d;
    gp.experts = static_cast<int>(experts.size());
    gp.n = n_;
    gp.k = k_;
    gp.ldd = ldd;
    gp.b_scale_ld = block_scale_ld(k_);
    if (tma) {
      run_tma(host_offsets, experts, gp, static_cast<int>(tiles), stream);
      return;
    }
    HYMOE_CUDA_CHECK(launch::fp8_grouped_gemm(gp, kernel, static_cast<int>(tiles), stream));
    return;
  }
  // One cuBLASLt plan per expert row count, found before anything is launched.
  expert_plan_.assign(experts.size(), nullptr);
  order_.clear();
  size_t workspace = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    const int rows = host_offsets[e + 1] - host_offsets[e];
    if (rows == 0) continue;
    auto it = plans_.find({rows, ldd});
    if (it == plans_.end()) {
      it = plans_.emplace(std::pair{rows, ldd},
                          GemmPlan(*lt_, GemmKind::kFp8BlockScale, GemmShape{rows, n_, k_, k_, k_, ldd}))
               .first;
    }
    expert_plan_[e] = &it->second;
    workspace = std::max(workspace, it->second.workspace_bytes());
    order_.push_back(static_cast<int>(e));
  }
  const int lanes = std::min<int>(streams_, static_cast<int>(order_.size()));
  if (lanes > 1) {
    while (static_cast<int>(side_.size()) < lanes - 1) {
      side_.emplace_back();
      side_done_.emplace_back(false);
      side_workspace_.emplace_back();
    }
    for (int i = 0; i < lanes - 1; ++i) {
      if (side_workspace_[i].bytes() >= workspace) continue;
      side_[i].synchronize();  // the old workspace may still be in use by its last run
      side_workspace_[i] = DeviceBuffer(workspace);
    }
    // Largest first, each to the lane with the fewest rows so far (ties: the lowest lane).
    std::stable_sort(order_.begin(), order_.end(), [&](int x, int y) {
      return host_offsets[x + 1] - host_offsets[x] > host_offsets[y + 1] - host_offsets[y];
    });
    lane_rows_.assign(lanes, 0);
    fork_.record(stream);
    for (int i = 0; i < lanes - 1; ++i) fork_.wait_on(side_[i]);
  }
  for (const int e : order_) {
    const int off = host_offsets[e], rows = host_offsets[e + 1] - off;
    int lane = 0;
    if (lanes > 1) {
      lane = static_cast<int>(std::min_element(lane_rows_.begin(), lane_rows_.end()) -
                              lane_rows_.begin());
      lane_rows_[lane] += rows;
    }
    const GemmOperands ops{a + int64_t{off} * k_,
                           a_scales + grouped_scale_offset(col_blocks, off, e), experts[e].w,
                           experts[e].scales, d + int64_t{off} * ldd};
    if (lane == 0) {
      expert_plan_[e]->run(ops, stream);
    } else {
      DeviceBuffer& ws = side_workspace_[lane - 1];
      expert_plan_[e]->run(ops, side_[lane - 1], ws.data(), ws.bytes());
    }
  }
  for (int i = 0; i < lanes - 1; ++i) {
    side_done_[i].record(side_[i]);
    side_done_[i].wait_on(stream);
  }
}

void GroupedFp8Gemm::set_streams(int streams) {
  HYMOE_CHECK(streams >= 1 && streams <= kMaxStreams, kInvalidArgument,
              "grouped gemm: {} streams (1..{})", streams, kMaxStreams);
  streams_ = streams;
}

}  // namespace hymoe::gpu
