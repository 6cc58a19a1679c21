// Entry point of MLA prefill attention: shape, stride and alignment checks, then the launcher.
#include "hymoe/gpu/mla_prefill.h"

#include <algorithm>
#include <cstdint>

#include "hymoe/gpu/cuda_check.h"
#include "kernel_launch.h"
#include "mla_prefill_check.h"

namespace hymoe::gpu {

void check_mla_prefill_params(const MlaPrefillParams& p, bool pointers) {
  // Every row must see a key (row 0 sees key 0); kv_tokens < past + tokens is a window.
  HYMOE_CHECK(p.tokens >= 0 && p.heads >= 1 && p.heads <= 65535 && p.past >= 0 && (p.tokens == 0 || p.kv_tokens >= 1),
              kInvalidArgument, "mla_prefill: tokens {} kv_tokens {} past {} heads {}", p.tokens,
              p.kv_tokens, p.past, p.heads);
  if (p.tokens == 0) return;  // nothing is read: pointers may be null
  HYMOE_CHECK(!pointers || (p.q && p.k_nope && p.k_pe && p.v && p.out), kInvalidArgument,
              "mla_prefill: null pointer");
  for (const int64_t s : {p.q_token_stride, p.q_head_stride, p.k_token_stride, p.k_head_stride,
                          p.k_pe_token_stride, p.k_pe_head_stride, p.v_token_stride,
                          p.v_head_stride,
                          p.out_token_stride, p.out_head_stride}) {
    HYMOE_CHECK(s >= 0 && s % 8 == 0, kInvalidArgument,
                "mla_prefill: strides must be multiples of 8 elements (got {})", s);
  }
  for (const void* ptr : {static_cast<const void*>(p.q), static_cast<const void*>(p.k_nope),
                          static_cast<const void*>(p.k_pe), static_cast<const void*>(p.v),
                          static_cast<const void*>(p.out)}) {
    HYMOE_CHECK((reinterpret_cast<uintptr_t>(ptr) & 15u) == 0, kInvalidArgument,
                "mla_prefill: tensors must be 16-byte aligned");
  }
}

void mla_merge_attention(const MlaMergeParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.heads >= 1 && p.heads <= 4096, kInvalidArgument, "mla_merge_attention: rows {} heads {}",
              p.rows, p.heads);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.out && p.lse && p.part && p.part_lse, kInvalidArgument, "mla_merge_attention: null pointer");
  for (const int64_t s : {p.out_token_stride, p.out_head_stride, p.part_token_stride, p.part_head_stride}) {
    HYMOE_CHECK(s >= 0 && s % 2 == 0, kInvalidArgument, "mla_merge_attention: strides must be even (got {})", s);
  }
  HYMOE_CHECK((reinterpret_cast<uintptr_t>(p.out) & 3u) == 0 && (reinterpret_cast<uintptr_t>(p.part) & 3u) == 0,
              kInvalidArgument, "mla_merge_attention: out and part must be 4-byte aligned");
  HYMOE_CUDA_CHECK(launch::mla_merge_attention(p, stream));
}

void mla_prefill(const MlaPrefillParams& p, cudaStream_t stream) {
  check_mla_prefill_params(p);
  if (p.tokens == 0) return;
  HYMOE_CUDA_CHECK(launch::mla_prefill(p, stream));
}

}  // namespace hymoe::gpu
