// Entry points of the MoE dispatch kernels and the grouped expert GEMM.
#include "hymoe/gpu/moe.h"

#include "hymoe/gpu/cuda_check.h"
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

void GroupedFp8Gemm::run(std::span<const int32_t> host_offsets,
                         std::span<const ExpertWeight> experts, const Fp8E4M3* a,
                         const float* a_scales, Bf16* d, int64_t ldd, cudaStream_t stream) {
  HYMOE_CHECK(host_offsets.size() == experts.size() + 1, kInvalidArgument,
              "grouped gemm: {} offsets for {} experts", host_offsets.size(), experts.size());
  const int64_t col_blocks = (k_ + 127) / 128;
  for (size_t e = 0; e < experts.size(); ++e) {
    const int off = host_offsets[e], rows = host_offsets[e + 1] - off;
    HYMOE_CHECK(rows >= 0, kInvalidArgument, "grouped gemm: offsets decrease at expert {}", e);
    if (rows == 0) continue;
    auto it = plans_.find({rows, ldd});
    if (it == plans_.end()) {
      it = plans_.emplace(std::pair{rows, ldd},
                          GemmPlan(*lt_, GemmKind::kFp8BlockScale, GemmShape{rows, n_, k_, k_, k_, ldd}))
               .first;
    }
    it->second.run({a + int64_t{off} * k_, a_scales + col_blocks * off, experts[e].w,
                    experts[e].scales, d + int64_t{off} * ldd},
                   stream);
  }
}

}  // namespace hymoe::gpu
