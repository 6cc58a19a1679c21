// FP8 (E4M3FN, 128x128 block-scaled) matrix times a small batch of BF16 vectors: the decode-time
// linear layer, bound by DRAM bandwidth. Weights are decoded to BF16 in registers (never stored),
// dotted with BF16 activations into FP32, and each 128-wide K block's partial sum is multiplied by
// its block scale once ("post-scaling"). All batch rows share one pass over the weights.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hymoe/kernels/isa.h"
#include "hymoe/kernels/fp8_matrix.h"

namespace hymoe::kernels {

inline constexpr int kMaxGemvBatch = 8;

// One call computes rows [row_begin, row_end) of y[b] = W x[b] for b < batch:
//   y[b][i] = out_scale[b] * sum_j W[i][j] * x[b][j]
// Batch rows are given by pointer, so callers gather tokens without copying them. Callers split
// rows across threads; any split works, 128-row multiples keep scale rows whole.
struct Fp8GemvParams {
  Fp8MatrixView w;                             // [rows, cols] FP8 with scale_inv [rows/128, cols/128]
  int batch = 1;                           // 1..kMaxGemvBatch
  const uint16_t* x[kMaxGemvBatch] = {};   // BF16 activations, row b has w.cols values
  float* y[kMaxGemvBatch] = {};            // FP32 outputs, indexed by absolute row i
  float out_scale[kMaxGemvBatch] = {1, 1, 1, 1, 1, 1, 1, 1};  // factor per batch row
  int64_t row_begin = 0;
  int64_t row_end = 0;
  // Optional hint: where the calling thread's next GEMV call starts reading (its first row). The
  // AVX512-BF16 variant prefetches that call's first pass (as many bytes as one of this call's
  // passes) during its own last pass, which otherwise has nothing ahead to prefetch. Only a
  // prefetch: any address is safe, results do not depend on it.
  const uint8_t* prefetch_next = nullptr;

  // Rows of x every x_stride elements, of y every y_stride, all rows of w, scales 1.
  static Fp8GemvParams strided(const Fp8MatrixView& w, int batch, const uint16_t* x, int64_t x_stride,
                               float* y, int64_t y_stride) {
    Fp8GemvParams p;
    p.w = w;
    p.batch = batch;
    for (int b = 0; b < batch && b < kMaxGemvBatch; ++b) {
      p.x[b] = x + b * x_stride;
      p.y[b] = y + b * y_stride;
    }
    p.row_end = w.rows;
    return p;
  }
};

// Dispatches to best_isa(). Preconditions (checked by validate(), not here: hot path):
// 1 <= batch <= 8, 0 <= row_begin <= row_end <= rows, x[b] and y[b] set for b < batch, no
// aliasing of x and y. The AVX512-BF16 variant copies the activations into a 128 KB stack
// buffer: call it from threads with ordinary (MB-sized) stacks.
void fp8_gemv(const Fp8GemvParams& p);
// One named variant; the caller guarantees isa_supported(isa).
void fp8_gemv(Isa isa, const Fp8GemvParams& p);
// The AMX-BF16 variant (the caller guarantees fp8_gemv_amx_supported()): the AVX512-BF16 variant's decode, 16
// rows at a time into tiles in L1, and the dot products on the tile unit (tdpbf16ps against the
// activations as a 16 K pair x batch tile), so batch 2..8 cost about what batch 1 does. Opt-in:
// fp8_gemv(p) never picks it. On this project's Xeons it is slower at batch 1 (0.6-0.8x of
// AVX512-BF16) and faster from batch 4 (1.2-2.3x; docs/experiments.md), and a token's result
// must not depend on its batch (batch invariance), so one variant serves every batch: the
// AVX512-BF16 one. Rows are bitwise the same at every batch size and row split within this
// variant. Its activation buffers are per-thread scratch, grown when a thread first meets a
// larger batch x K.
void fp8_gemv_amx(const Fp8GemvParams& p);
bool fp8_gemv_amx_supported();  // amx_usable() and the AVX512-BF16 variant's decode
// Throws hymoe::Error (kInvalidArgument) naming the bad field.
void validate(const Fp8GemvParams& p);

// Software prefetch and row order of the AVX512-BF16 variant (tuning and benchmarks; results
// never depend on it). Defaults: the environment (HYMOE_GEMV_PREFETCH, HYMOE_GEMV_PREFETCH_L1,
// HYMOE_GEMV_PREFETCH_FIRST, HYMOE_GEMV_ROW_BLOCKS, HYMOE_GEMV_ROW_STREAMS, read at first
// use), else default_gemv_prefetch(). Every call reads
// the current setting.
struct GemvPrefetch {
  // Bytes ahead of the pass being read; negative: one pass (R rows x K: the same columns of the
  // next row group); 0: no software prefetch at all (the hardware prefetchers alone).
  int64_t distance = -1;
  // At batch 1-2, prefetch into L1 (T0) when the distance is <= this, else into L2 (T1). 16 KB is
  // one pass of 8 rows x 2048 (the down projection at batch 1), which with the pass being read
  // fits a 48 KB L1; 8 x 7168 (gate/up) does not. 0 (the default): always L2.
  int64_t l1_bytes = 0;
  bool first_pass = true;  // prefetch a call's first pass up front
  // Batch 1: row_blocks > 0 reads rows start to end in turn with that many K blocks of each in
  // flight, row_streams rows at a time (one from each of row_streams equal parts of the call's
  // rows: that many address streams per thread); 0 = 8 adjacent rows side by side. (blocks,
  // streams) one of (4, 1), (8, 1), (4, 2), (2, 4); set_gemv_prefetch rejects other pairs, which
  // from the environment mean 8 rows side by side. Same results bitwise.
  int row_blocks = 0;
  int row_streams = 1;
};
// The defaults for the CPU we run on: the values above (8 rows side by side, next pass into L2),
// but on AMD the next pass prefetched into L1 (l1_bytes unbounded). Why: on Zen 5 the MoE layer
// ran 1-8% faster with L1 prefetch in 18 of 18 alternating comparisons (batch 1-2, table and shift
// decode; the 7168x2048 GEMV alone lost 0-4% at one thread), while on the 16-core Xeon L2 won 30
// of 38 paired batch-1 cases. Rows in turn (row_blocks > 0) lost to the 8-row pass on Zen 5 and
// were no better on the Xeon. docs/experiments.md (CPU: FP8 GEMV) has the measurements.
GemvPrefetch default_gemv_prefetch();
GemvPrefetch gemv_prefetch();
void set_gemv_prefetch(const GemvPrefetch& p);

// Software prefetch of the AMX variant (tuning and benchmarks; results never depend on it), read
// on every call. Per 64-byte load of a group's row: the same bytes `groups_ahead` 16-row groups
// ahead into L2 (cut to the call's last group; 0: none), and the row's bytes `l1_ahead` ahead
// into L1 (0: none).
struct AmxGemvPrefetch {
  int groups_ahead = 1;
  int64_t l1_ahead = 512;
};
AmxGemvPrefetch amx_gemv_prefetch();
void set_amx_gemv_prefetch(const AmxGemvPrefetch& p);

// Plain reference: every weight through fp8_e4m3_to_float * scale, double accumulation.
void fp8_gemv_reference(const Fp8GemvParams& p);

// Decodes n FP8 codes to BF16 bits with a variant's in-register decode (exact for every code,
// subnormals included; NaN codes give a BF16 NaN). For tests of the decode itself.
void fp8_to_bf16(Isa isa, const uint8_t* src, uint16_t* dst, size_t n);

}  // namespace hymoe::kernels
