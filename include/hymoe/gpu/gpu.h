// The GPU module at a glance (one include for users; each header documents its contract).
//
// Foundation
//   cuda_check.h   HYMOE_CUDA_CHECK / HYMOE_CUBLAS_CHECK (+ nccl_check.h): failures -> hymoe::Error
//   device.h       device_count (never throws), query_device, MemoryBudget (emulate a 32 GB card)
//   stream.h       RAII Stream, Event (timing, cross-stream waits)
//   graph.h        RAII CapturedGraph: a stream's enqueued work captured once, replayed
//   buffer.h       RAII DeviceBuffer (optionally budgeted), PinnedBuffer
//   cublaslt.h     RAII cuBLASLt handle + workspace
//   dtypes.h       Bf16 / Fp8E4M3 element types shared by host and device code
//   sm_clock.h     SmClockProbe: the SM clock as it runs, measured by a kernel (benchmarks
//                  quote it beside compute-bound figures)
// Kernels (device code in kernels/cuda/, launchers in src/gpu/; each takes a params struct and a
// cudaStream_t, checks shapes on the host, and has a scalar reference in tests/gpu/)
//   norm.h         RMSNorm (HF rounding order)
//   activation.h   SiLU-and-multiply
//   embedding.h    embedding gather
//   rope.h         YaRN RoPE of DeepSeek-V3 (interleaved in, rotate-half out), table builder
//   router.h       noaux_tc router (sigmoid, bias, group-limited top-k, normalise, scale)
//   fp8_quant.h    activation quantiser: FP8 per token per 128 columns (+ grouped scale layout)
//   gemm.h         cuBLASLt GEMM plans: BF16, FP8 per-tensor, DeepSeek block-scaled FP8
//   fp8_block_gemm.h  our block-scaled FP8 GEMM (mma.sync), GemmPlan's fallback where cuBLASLt
//                  has no algorithm
//   fp8_gemv.h     FP8 GEMV for 1..8 decode tokens, BF16 or FP8 activations (opt-in
//                  programmatic dependent launch)
//   mla_decode.h   MLA decode attention, absorbed form, paged latent cache, split-K
//   mla_prefill.h  MLA prefill attention, causal, chunked prefill over a cache
//   moe.h          MoE prefill: expert offsets, permute, grouped FP8 GEMM, weighted un-permute
//   sampling.h     sampling with the CPU sampler's semantics and seeded draw
// Included on their own (not by this header):
//   layer_kernels.h  the GPU layer path's small kernels (hybrid executor, SLP): FP32 residual
//                  stream, dense GEMVs, latent cache rows, generic MLA attention, moe_gemv
//   mla_decode_plan.h  a decode step's work list for batches of mixed lengths
//   mla_prefill_cudnn.h  MLA prefill by cuDNN's fused flash attention (cuDNN loaded at run time)
//   upload.h       small host-to-device uploads as kernels (not queued behind the copy engines)
//   host_register.h  cudaHostRegister over host memory (stream-loaded weights at the pinned rate)
//   expert_tensor_maps.h, wgmma_layout.h  host-side layout logic of the wgmma kernels, tested on
//                  the CPU
#pragma once

#include "hymoe/gpu/activation.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/dtypes.h"
#include "hymoe/gpu/embedding.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/fp8_gemv.h"
#include "hymoe/gpu/fp8_quant.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/graph.h"
#include "hymoe/gpu/mla_decode.h"
#include "hymoe/gpu/mla_prefill.h"
#include "hymoe/gpu/moe.h"
#include "hymoe/gpu/norm.h"
#include "hymoe/gpu/rope.h"
#include "hymoe/gpu/router.h"
#include "hymoe/gpu/sampling.h"
#include "hymoe/gpu/sm_clock.h"
#include "hymoe/gpu/stream.h"
