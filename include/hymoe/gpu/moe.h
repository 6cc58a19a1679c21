// MoE prefill on the GPU: tokens grouped by expert, one block-scaled FP8 GEMM per expert, and a
// weighted un-permute back to token order.
//   1. moe_expert_offsets: expert_offsets[e] = first permuted row of expert e (exclusive scan of
//      the routing counts, [experts + 1]) and slot_rows[t*top_k + j] = the permuted row of token
//      t's j-th expert. Rows inside an expert come in no fixed order (atomics); every later stage
//      computes a row independently of its position, so the results do not depend on it.
//   2. moe_permute_fp8: copies each token's FP8 row (quantize_fp8_per_token_block output) to its
//      permuted rows, and its scales to the grouped layout the per-expert GEMMs read.
//   3. GroupedFp8Gemm: per expert with rows, D[rows of e] = A[rows of e] * W_e^T (GemmPlan kind
//      kFp8BlockScale; plans cached per row count). Needs the offsets on the host.
//   4. moe_unpermute: out[t] = sum_j topk_weights[t][j] * y[slot_rows[t*top_k + j]].
// Activation scales of the permuted rows use the grouped layout of fp8_quant.h (a packed
// [ceil(cols/128)][m_e] block per expert at grouped_scale_offset(col_blocks, offset_e, e)).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/dtypes.h"
#include "hymoe/gpu/expert_tensor_maps.h"
#include "hymoe/gpu/fp8_quant.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/stream.h"

namespace hymoe::gpu {

inline constexpr int kMoeMaxExperts = 1024;

struct MoeOffsetsParams {
  const int32_t* topk_ids = nullptr;  // [tokens, top_k], each in [0, experts)
  int32_t* expert_offsets = nullptr;  // [experts + 1]
  int32_t* cursor = nullptr;          // [experts] scratch
  int32_t* slot_rows = nullptr;       // [tokens * top_k]
  int tokens = 0;
  int top_k = 0;
  int experts = 0;                    // <= kMoeMaxExperts
};
void moe_expert_offsets(const MoeOffsetsParams& p, cudaStream_t stream);

struct MoePermuteParams {
  const Fp8E4M3* x = nullptr;          // [tokens, cols] quantised tokens
  const float* x_scales = nullptr;     // [ceil(cols/128), x_scale_ld] (quantiser layout)
  const int32_t* topk_ids = nullptr;   // [tokens, top_k]
  const int32_t* slot_rows = nullptr;  // [tokens * top_k]
  const int32_t* expert_offsets = nullptr;  // [experts + 1]
  Fp8E4M3* out = nullptr;              // [tokens * top_k, cols] in expert order
  float* out_scales = nullptr;         // grouped layout: grouped_scale_floats(col_blocks,
                                       //   tokens * top_k, experts) floats
  int tokens = 0;
  int top_k = 0;
  int cols = 0;                        // a multiple of 16
  int64_t x_scale_ld = 0;              // >= tokens
};
void moe_permute_fp8(const MoePermuteParams& p, cudaStream_t stream);

struct MoeUnpermuteParams {
  const Bf16* y = nullptr;             // [tokens * top_k, cols] expert outputs in expert order
  const int32_t* slot_rows = nullptr;
  const float* topk_weights = nullptr; // [tokens, top_k]
  Bf16* out = nullptr;                 // [tokens, cols]
  int tokens = 0;
  int top_k = 0;
  int cols = 0;
  int64_t ldy = 0;
  int64_t ldo = 0;
};
void moe_unpermute(const MoeUnpermuteParams& p, cudaStream_t stream);

// One batch of experts' share of the weighted un-permute, added to an FP32 sum: for every token t
// and slot j whose expert topk_ids[t][j] lies in [expert_begin, expert_end), out[t] +=
// topk_weights[t][j] * y[slot_rows[t * top_k + j] - row_begin] (y holds the batch's rows only,
// the first at row_begin of the layer's expert order). Called once a batch over a zeroed out, it
// gives the whole layer's weighted sum while the expert outputs live only a batch at a time.
struct MoeUnpermuteAddParams {
  const Bf16* y = nullptr;             // [batch rows, ldy]
  const int32_t* slot_rows = nullptr;  // [tokens * top_k]
  const int32_t* topk_ids = nullptr;   // [tokens, top_k]
  const float* topk_weights = nullptr; // [tokens, top_k]
  float* out = nullptr;                // [tokens, ldo], added to
  int tokens = 0;
  int top_k = 0;
  int cols = 0;                        // a multiple of 8
  int64_t ldy = 0;
  int64_t ldo = 0;
  int expert_begin = 0, expert_end = 0;
  int64_t row_begin = 0;
};
void moe_unpermute_add(const MoeUnpermuteAddParams& p, cudaStream_t stream);

// One expert's FP8 weight [n, k] and its 128x128 scales [ceil(n/128), block_scale_ld(k)].
struct ExpertWeight {
  const Fp8E4M3* w = nullptr;
  const float* scales = nullptr;
};

// Device-side description of one grouped GEMM launch (fp8_block_gemm's grouped kernel).
struct GroupedGemmParams {
  const Fp8E4M3* a = nullptr;          // [rows, k] permuted tokens
  const float* a_scales = nullptr;     // grouped scale layout
  const int32_t* offsets = nullptr;    // [experts + 1] on the device
  const ExpertWeight* weights = nullptr;  // [experts] on the device
  Bf16* d = nullptr;                   // [rows, ldd]
  int experts = 0;
  int n = 0, k = 0;
  int64_t ldd = 0;
  int64_t b_scale_ld = 0;              // block_scale_ld(k)
};

// Backends: the wgmma ones (kWgmmaWsPipe, kWgmmaWs, kWgmmaWs64, kWgmma, kWgmma64,
// kWgmmaWsTmaGrouped: kWgmmaWsPipe's kernel with TMA loads, one tensor map per expert, and its
// opt-in variants kWgmmaWsTmaGroupedSt / Sc / X / ScX / ScXH / C / ScC / ScXC / ScCM / ScMW
// and kWgmmaTmaGroupedTx
// (gemm.h); sm_90a) and kHymoe (mma.sync, 64-row tiles, sm_89+) run every expert in one launch of
// hymoe's block-scaled kernel; kAuto picks kWgmmaWsTmaGroupedScMW where
// fp8_block_gemm_wgmma_supported(), else kHymoe where the GPU has FP8 mma.sync; kCublasLt runs
// one cuBLASLt plan per expert (its own kernel where cuBLASLt refuses the shape), each a separate
// launch, spread over set_streams() streams: one expert's GEMM (at 4K-16K tokens 128-512 rows,
// 16-56 column tiles) covers a fraction of the SMs, so several must run at once to fill them.
class GroupedFp8Gemm {
 public:
  GroupedFp8Gemm(const CublasLt& lt, int n, int k, GemmBackend backend = GemmBackend::kAuto);
  // host_offsets: expert_offsets copied to the host; device_offsets: the same on the device (the
  // one-launch backend reads them there). a: permuted FP8 rows [rows, k] with grouped scales;
  // d: [rows, ldd] BF16. Experts without rows are skipped.
  void run(std::span<const int32_t> host_offsets, const int32_t* device_offsets,
           std::span<const ExpertWeight> experts, const Fp8E4M3* a, const float* a_scales, Bf16* d,
           int64_t ldd, cudaStream_t stream);
  int n() const { return n_; }
  int k() const { return k_; }
  GemmBackend backend() const { return backend_; }
  // kCublasLt: how many streams the per-expert GEMMs run on, the caller's and streams - 1 of its
  // own forked from and joined back to it with events (so a graph capture sees one fork and one
  // join). Experts go to the least-loaded stream by rows, largest first. 1..kMaxStreams.
  static constexpr int kMaxStreams = 16;
  void set_streams(int streams);
  int streams() const { return streams_; }

 private:
  void run_tma(std::span<const int32_t> host_offsets, std::span<const ExpertWeight> experts,
               const GroupedGemmParams& gp, int tiles, cudaStream_t stream);
  const CublasLt* lt_;
  int n_, k_;
  GemmBackend backend_;
  std::map<std::pair<int, int64_t>, GemmPlan> plans_;  // by (rows, ldd)
  std::vector<ExpertWeight> weights_host_;              // what weights_dev_ holds
  DeviceBuffer weights_dev_;
  // kWgmmaWsTmaGrouped: one TMA tensor map per expert weight, encoded on the host (maps_host_)
  // when an expert with rows has a new weight, copied to maps_dev_ before the launch.
  ExpertTensorMapTable map_table_;
  std::vector<TensorMapBytes> maps_host_;
  DeviceBuffer maps_dev_;
  // kCublasLt with set_streams(> 1): side streams 1.. (0 is the caller's), each with its own
  // workspace and a join event; scratch for the assignment, reused across runs.
  int streams_ = 1;
  std::vector<Stream> side_;
  std::vector<Event> side_done_;
  std::vector<DeviceBuffer> side_workspace_;
  Event fork_{false};
  std::vector<int> order_;
  std::vector<int64_t> lane_rows_;
  std::vector<GemmPlan*> expert_plan_;
};

}  // namespace hymoe::gpu
