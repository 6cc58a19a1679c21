// Entry points of the FP8 kernels: shape checks, then the typed launchers.
#include <cstdint>

#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/fp8_gemv.h"
#include "hymoe/gpu/fp8_quant.h"
#include "kernel_launch.h"

namespace hymoe::gpu {
namespace {

// Programmatic dependent launch: compute capability 9.0 or newer.
bool pdl_supported() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major >= 9;
}

// The streaming GEMV kernel (mbarriers, bulk copies): compute capability 9.0 or newer, as PDL.
bool stream_supported() { return pdl_supported(); }

}  // namespace

void quantize_fp8_per_token_block(const Fp8QuantParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.cols >= 1 && p.x_stride >= p.cols && p.out_stride >= p.cols &&
                  (p.group_offsets ? p.groups >= 1 : p.scale_ld >= p.tokens),
              kInvalidArgument, "fp8 quantise: bad shape tokens={} cols={} strides={},{},{}",
              p.tokens, p.cols, p.x_stride, p.out_stride, p.scale_ld);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.x && p.out && p.scales, kInvalidArgument, "fp8 quantise: null pointer");
  const int64_t col_blocks = (p.cols + kFp8BlockSize - 1) / kFp8BlockSize;
  HYMOE_CHECK(p.tokens * col_blocks / 8 < 0x7fffffff, kInvalidArgument,
              "fp8 quantise: {} tokens too many for one launch", p.tokens);
  const bool vec = p.cols % 128 == 0 && p.x_stride % 4 == 0 && p.out_stride % 4 == 0 &&
                   (reinterpret_cast<uintptr_t>(p.x) & 7u) == 0 &&
                   (reinterpret_cast<uintptr_t>(p.out) & 3u) == 0;
  Fp8QuantParams q = p;
  q.pdl = p.pdl && pdl_supported();  // below sm_90: a plain launch
  HYMOE_CUDA_CHECK(launch::quantize_fp8(q, vec, stream));
}

namespace {

void check_gemv(const Fp8GemvParams& p) {
  HYMOE_CHECK(p.tokens >= 1 && p.tokens <= kGemvMaxTokens, kInvalidArgument,
              "fp8 gemv: {} tokens (1..{})", p.tokens, kGemvMaxTokens);
  HYMOE_CHECK(p.n >= 1 && p.k >= 16 && p.k % 16 == 0 && p.ldw >= p.k && p.ldw % 16 == 0 &&
                  p.ldx >= p.k && p.ldx % 8 == 0 && p.ldy >= p.n &&
                  p.scale_ld >= (p.k + 127) / 128,
              kInvalidArgument, "fp8 gemv: bad shape n={} k={} ldw={} ldx={} ldy={} scale_ld={}",
              p.n, p.k, p.ldw, p.ldx, p.ldy, p.scale_ld);
  HYMOE_CHECK(p.w && p.w_scales && p.x && (p.y || p.y_f32), kInvalidArgument, "fp8 gemv: null pointer");
  HYMOE_CHECK((reinterpret_cast<uintptr_t>(p.w) & 15u) == 0 &&
                  (reinterpret_cast<uintptr_t>(p.x) & 15u) == 0,
              kInvalidArgument, "fp8 gemv: weight and activations must be 16-byte aligned");
}

}  // namespace

void fp8_gemv(const Fp8GemvParams& p, cudaStream_t stream) {
  check_gemv(p);
  const bool mma_ok = fp8_block_gemm_supported();  // the same requirement: FP8 conversions, sm_89+
  HYMOE_CHECK(p.impl != Fp8GemvImpl::kTensorCores || mma_ok, kUnsupported,
              "fp8 gemv: the tensor-core kernel needs compute capability 8.9 or newer");
  HYMOE_CHECK(p.impl != Fp8GemvImpl::kStream || stream_supported(), kUnsupported,
              "fp8 gemv: the streaming kernel needs compute capability 9.0 or newer");
  Fp8GemvParams q = p;
  q.pdl = p.pdl && pdl_supported();  // below sm_90: a plain launch (the flag is a no-op)
  if (p.impl == Fp8GemvImpl::kStream) {
    HYMOE_CUDA_CHECK(launch::fp8_gemv_stream(&q, 1, stream));
    return;
  }
  // kAuto: tensor cores from 2 tokens on (flat in the token count: 2-4x the CUDA-core kernel at
  // 8 tokens on the H200) and for one token on long rows (7168x16384: 2.9 vs 2.4 TB/s); CUDA
  // cores for one token on short rows (up to 1.15x faster there).
  const bool tensor = p.impl == Fp8GemvImpl::kTensorCores ||
                      (p.impl == Fp8GemvImpl::kAuto && mma_ok && (p.tokens >= 2 || p.k >= 8192));
  HYMOE_CUDA_CHECK(launch::fp8_gemv(q, tensor, stream));
}

void fp8_gemv_fused(const Fp8GemvParams* parts, int count, cudaStream_t stream) {
  HYMOE_CHECK(parts && count >= 1 && count <= kGemvMaxFused, kInvalidArgument,
              "fp8 gemv fused: {} parts (1..{})", count, kGemvMaxFused);
  Fp8GemvParams q[kGemvMaxFused];
  for (int i = 0; i < count; ++i) {
    check_gemv(parts[i]);
    HYMOE_CHECK(parts[i].x == parts[0].x && parts[i].ldx == parts[0].ldx &&
                    parts[i].tokens == parts[0].tokens && parts[i].k == parts[0].k,
                kInvalidArgument, "fp8 gemv fused: part {} differs from part 0 in x, ldx, tokens or k", i);
    q[i] = parts[i];
  }
  HYMOE_CHECK(stream_supported(), kUnsupported,
              "fp8 gemv fused: needs compute capability 9.0 or newer");
  q[0].pdl = parts[0].pdl && pdl_supported();
  HYMOE_CUDA_CHECK(launch::fp8_gemv_stream(q, count, stream));
}

namespace {

void check_gemv_q8(const Fp8GemvQ8Params& p) {
  HYMOE_CHECK(p.tokens >= 1 && p.tokens <= kGemvMaxTokens, kInvalidArgument,
              "fp8 gemv q8: {} tokens (1..{})", p.tokens, kGemvMaxTokens);
  HYMOE_CHECK(p.n >= 1 && p.k >= 16 && p.k % 16 == 0 && p.ldw >= p.k && p.ldw % 16 == 0 &&
                  p.ldx >= p.k && p.ldx % 16 == 0 && p.ldy >= p.n &&
                  p.scale_ld >= (p.k + 127) / 128 && p.x_scale_ld >= p.tokens,
              kInvalidArgument,
              "fp8 gemv q8: bad shape n={} k={} ldw={} ldx={} ldy={} scale_ld={} x_scale_ld={}", p.n,
              p.k, p.ldw, p.ldx, p.ldy, p.scale_ld, p.x_scale_ld);
  HYMOE_CHECK(p.w && p.w_scales && p.x && p.x_scales && p.y, kInvalidArgument, "fp8 gemv q8: null pointer");
  HYMOE_CHECK(p.warps_per_tile == 0 || p.warps_per_tile == 4 || p.warps_per_tile == 8 || p.warps_per_tile == 16,
              kInvalidArgument, "fp8 gemv q8: warps_per_tile {} (0, 4, 8 or 16)", p.warps_per_tile);
  HYMOE_CHECK(!p.x_bf16 || (p.ldx_bf16 >= p.k && p.ldx_bf16 % 8 == 0 &&
                            (reinterpret_cast<uintptr_t>(p.x_bf16) & 15u) == 0),
              kInvalidArgument, "fp8 gemv q8: BF16 activations need 16-byte aligned rows, ldx_bf16={} k={}",
              p.ldx_bf16, p.k);
  HYMOE_CHECK((reinterpret_cast<uintptr_t>(p.w) & 15u) == 0 &&
                  (reinterpret_cast<uintptr_t>(p.x) & 15u) == 0,
              kInvalidArgument, "fp8 gemv q8: weight and activations must be 16-byte aligned");
}

}  // namespace

bool fp8_gemv_q8_supported() { return fp8_block_gemm_supported(); }  // FP8 mma.sync: sm_89+

void fp8_gemv_q8(const Fp8GemvQ8Params& p, cudaStream_t stream) { fp8_gemv_q8_fused(&p, 1, stream); }

void fp8_gemv_q8_fused(const Fp8GemvQ8Params* parts, int count, cudaStream_t stream) {
  HYMOE_CHECK(parts && count >= 1 && count <= kGemvMaxFused, kInvalidArgument,
              "fp8 gemv q8: {} parts (1..{})", count, kGemvMaxFused);
  Fp8GemvQ8Params q[kGemvMaxFused];
  for (int i = 0; i < count; ++i) {
    check_gemv_q8(parts[i]);
    HYMOE_CHECK(parts[i].x == parts[0].x && parts[i].x_scales == parts[0].x_scales &&
                    parts[i].ldx == parts[0].ldx && parts[i].x_scale_ld == parts[0].x_scale_ld &&
                    parts[i].tokens == parts[0].tokens && parts[i].k == parts[0].k &&
                    parts[i].x_bf16 == parts[0].x_bf16 && parts[i].ldx_bf16 == parts[0].ldx_bf16,
                kInvalidArgument,
                "fp8 gemv q8: part {} differs from part 0 in x, x_scales, ldx, x_scale_ld, tokens, k or x_bf16", i);
    q[i] = parts[i];
  }
  HYMOE_CHECK(fp8_gemv_q8_supported(), kUnsupported,
              "fp8 gemv q8: FP8 tensor cores need compute capability 8.9 or newer");
  q[0].pdl = parts[0].pdl && pdl_supported();
  if (q[0].x_bf16) {
    // BF16 activations: the quantiser into x / x_scales first, in the same PDL mode. (Each block
    // quantising x itself in its staging, bitwise the same, measured 1.4-2.4x slower on the H200:
    // every block's serial load / amax / divide chain before its first math.)
    Fp8QuantParams qp{q[0].x_bf16, const_cast<Fp8E4M3*>(q[0].x), const_cast<float*>(q[0].x_scales),
                      q[0].tokens, q[0].k, q[0].ldx_bf16, q[0].ldx, q[0].x_scale_ld};
    qp.pdl = q[0].pdl;
    quantize_fp8_per_token_block(qp, stream);
    for (int i = 0; i < count; ++i) q[i].x_bf16 = nullptr;
  }
  HYMOE_CUDA_CHECK(launch::fp8_gemv_q8(q, count, stream));
}

}  // namespace hymoe::gpu
