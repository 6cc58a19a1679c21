// Entry points of the row-wise kernels: shape checks, then the typed launchers.
#include <cstdint>

#include "hymoe/gpu/activation.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/embedding.h"
#include "hymoe/gpu/norm.h"
#include "hymoe/gpu/rope.h"
#include "kernel_launch.h"

namespace hymoe::gpu {
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
constexpr int kMaxGridY = 65535;

}  // namespace

void rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.cols >= 1 && p.x_stride >= p.cols && p.out_stride >= p.cols,
              kInvalidArgument, "rmsnorm: bad shape rows={} cols={} strides={},{}", p.rows,
              p.cols, p.x_stride, p.out_stride);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.x && p.weight && p.out, kInvalidArgument, "rmsnorm: null pointer");
  const bool vec = p.cols % 8 == 0 && p.x_stride % 8 == 0 && p.out_stride % 8 == 0 &&
                   aligned16(p.x) && aligned16(p.out) && aligned16(p.weight);
  const int threads = p.cols >= 4096 ? 512 : p.cols >= 1024 ? 256 : 128;
  HYMOE_CUDA_CHECK(launch::rmsnorm(p, vec, threads, stream));
}

void silu_mul(const SiluMulParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.cols >= 1 && p.in_stride >= 2 * int64_t{p.cols} &&
                  p.out_stride >= p.cols,
              kInvalidArgument, "silu_mul: bad shape rows={} cols={} strides={},{}", p.rows,
              p.cols, p.in_stride, p.out_stride);
  HYMOE_CHECK(p.rows <= kMaxGridY, kInvalidArgument, "silu_mul: {} rows in one launch (max {})",
              p.rows, kMaxGridY);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.gate_up && p.out, kInvalidArgument, "silu_mul: null pointer");
  const bool vec = p.cols % 8 == 0 && p.in_stride % 8 == 0 && p.out_stride % 8 == 0 &&
                   aligned16(p.gate_up) && aligned16(p.out);
  HYMOE_CUDA_CHECK(launch::silu_mul(p, vec, stream));
}

void embedding_gather(const EmbeddingParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.dim >= 1 && p.vocab >= 1 && p.out_stride >= p.dim,
              kInvalidArgument, "embedding_gather: bad shape tokens={} vocab={} dim={}",
              p.tokens, p.vocab, p.dim);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.ids && p.table && p.out, kInvalidArgument, "embedding_gather: null pointer");
  const bool vec = p.dim % 8 == 0 && p.out_stride % 8 == 0 && aligned16(p.table) &&
                   aligned16(p.out);
  const int threads = p.dim >= 2048 ? 256 : 128;
  HYMOE_CUDA_CHECK(launch::embedding_gather(p, vec, threads, stream));
}

void rope_yarn(const RopeParams& p, cudaStream_t stream) {
  const int dim = p.table.rope_dim;
  HYMOE_CHECK(dim >= 2 && dim % 2 == 0 && dim <= kMaxRopeDim, kInvalidArgument,
              "rope_yarn: rope_dim {} must be even and <= {}", dim, kMaxRopeDim);
  HYMOE_CHECK(p.tokens >= 0 && p.tokens <= kMaxGridY && p.heads >= 1, kInvalidArgument,
              "rope_yarn: bad shape tokens={} (max {}) heads={}", p.tokens, kMaxGridY, p.heads);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.x && p.positions, kInvalidArgument, "rope_yarn: null pointer");
  HYMOE_CUDA_CHECK(launch::rope_yarn(p, stream));
}

void route_noaux_tc(const RouterParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.experts >= 1 && p.experts <= kRouterMaxExperts && p.groups >= 1 &&
                  p.groups <= kRouterMaxGroups && p.experts % p.groups == 0 &&
                  p.experts / p.groups >= 2,
              kInvalidArgument, "router: {} experts in {} groups unsupported", p.experts,
              p.groups);
  HYMOE_CHECK(p.topk_group >= 1 && p.topk_group <= p.groups && p.top_k >= 1 &&
                  p.top_k <= kRouterMaxTopK && p.top_k <= p.topk_group * (p.experts / p.groups),
              kInvalidArgument, "router: top_k {} from {} of {} groups unsupported", p.top_k,
              p.topk_group, p.groups);
  HYMOE_CHECK(p.tokens >= 0, kInvalidArgument, "router: negative token count");
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.logits && p.bias && p.topk_ids && p.topk_weights, kInvalidArgument,
              "router: null pointer");
  HYMOE_CUDA_CHECK(launch::route_noaux_tc(p, stream));
}

}  // namespace hymoe::gpu
