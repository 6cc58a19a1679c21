// Side-by-side driver for a peer (docs/experiments.md, MLA decode):
// FlashMLA's SM90 dense decode (BF16 latent cache, paged in 64-token blocks, absorbed MLA with
// q/k head dim 576 and v head dim 512, split-KV over the SMs plus a combine kernel) on the shapes
// of hymoe-bench-gpu's `mla_decode` section: 128 query heads, one latent head, one new token a
// sequence, contexts 1K / 8K / 64K at batch 1 / 2 / 4 / 8 (every sequence the same length), one
// 8K or 64K sequence beside seven of 1K and one 64K beside 39 of 1K, each sequence's blocks
// contiguous in the cache. Figures are counted as hymoe's: cache bytes (the sequences' tokens x
// 576 x 2) a second against the device-to-device copy rate, and FLOP (2 x 128 x tokens x (576 +
// 512)) a second against cuBLAS's BF16 GEMM at 8192^3, both ceilings measured in this process.
// Timing: the scheduling metadata once per shape (FlashMLA computes it once a decode step for
// every layer), then the attention and combine launches, median of 7 batches of 20 calls after a
// warm-up; `+meta` also counts a metadata launch per call; `,graph` 8 calls replayed as one
// captured CUDA graph, per call. --steady: only the graph, in the power-limited steady state
// (500 ms of replays, then the median of 7 batches of >= 40 ms; rows tagged `,steady`, with the
// SM clock read after each batch, "at N MHz"), as hymoe-bench-gpu's mla_decode_steady section
// times hymoe's rows.
// Correctness: 4 heads of sequence 0 against a host FP64 softmax(q k^T * scale) v over the same
// BF16 values (max |error| / max |reference|; BF16 output rounding is ~4e-3).
// Not part of hymoe's build: the peer is fetched and built outside the project, never committed.
// Build (a FlashMLA checkout at 9241ae3 with its CUTLASS submodule at 147f567), sm_90a:
//   bench/gpu/peers/build-flashmla-driver $FLASHMLA $CUTLASS   (-> .carry/peer/flashmla_bench)
// Run: flashmla_bench [--steady] [CASE]   (CASE: only the cases whose label holds it, e.g. under ncu)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "params.h"
#include "sm_clock.cuh"  // hymoe's SM clock probe (kernels/cuda)
#include "sm90/decode/dense/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)
#define CKB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
  std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, int(s_)); std::exit(1); } } while (0)

constexpr int kHeads = 128, kDk = 576, kDv = 512, kPage = 64;

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16(scale * (float(h & 0xffff) / 32768.0f - 1.0f));
  }
}

static float bf16f(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }

// Milliseconds of `reps` back-to-back enqueues, by CUDA events around them.
template <typename F>
static double batch_ms(cudaStream_t s, int reps, F& enqueue) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, s));
  for (int i = 0; i < reps; ++i) enqueue();
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms;
}

// The SM clock now (MHz): hymoe's probe kernel (kernels/cuda/sm_clock.cuh) for 200 us on `s`.
static double sm_clock_mhz(cudaStream_t s) {
  static float* d_mhz = nullptr;
  if (!d_mhz) CK(cudaMalloc(&d_mhz, sizeof(float)));
  hymoe::gpu::kernels::sm_clock_kernel<<<1, 32, 0, s>>>(200000, d_mhz);
  CK(cudaGetLastError());
  float mhz = 0;
  CK(cudaMemcpyAsync(&mhz, d_mhz, sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  return mhz;
}

// The median over 7 batches of `reps` calls of one call's milliseconds; with `mhz`, the SM clock
// read after each batch too, its median there (as hymoe-bench-gpu's steady records carry it).
template <typename F>
static double median_of_batches(cudaStream_t s, int reps, F& enqueue, double* mhz = nullptr) {
  std::vector<double> t, clock;
  for (int b = 0; b < 7; ++b) {
    t.push_back(batch_ms(s, reps, enqueue) / reps);
    if (mhz) clock.push_back(sm_clock_mhz(s));
  }
  if (mhz) {
    std::sort(clock.begin(), clock.end());
    *mhz = clock[clock.size() / 2];
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Milliseconds of one enqueue: 10 warm-up calls, then the median of 7 batches of `reps`.
template <typename F>
static double median_ms(cudaStream_t s, int reps, F&& enqueue) {
  for (int i = 0; i < 10; ++i) enqueue();
  return median_of_batches(s, reps, enqueue);
}

// Milliseconds of one enqueue in the power-limited steady state, as hymoe-bench-gpu's
// Bench::steady_ms: back to back for 500 ms first, then the median of 7 batches of >= 40 ms.
// *mhz: the SM clock it ran at.
template <typename F>
static double steady_ms(cudaStream_t s, F&& enqueue, double* mhz) {
  double settled = 0, once = 1e30;
  while (settled < 500.0) {
    const double ms = batch_ms(s, 1, enqueue);
    settled += ms;
    once = std::min(once, ms);
  }
  return median_of_batches(s, std::clamp(static_cast<int>(40.0 / once), 2, 400), enqueue, mhz);
}

int main(int argc, char** argv) {
  std::string only;
  bool steady = false;  // --steady: only the graph timing, in the power-limited steady state
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steady")) steady = true;
    else only = argv[i];
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  // Ceilings: device-to-device copy of 2 GiB, cuBLAS BF16 GEMM at 8192^3 (FP32 accumulation).
  double copy_gbs = 0, bf16_tflops = 0;
  {
    const size_t bytes = size_t(2) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemsetAsync(a, 1, bytes, s));
    const double ms = median_ms(s, 3, [&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); });
    copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
    CK(cudaFree(a));
    CK(cudaFree(b));
    const int n = 8192;
    __nv_bfloat16 *x, *y, *z;
    CK(cudaMalloc(&x, size_t(n) * n * 2));
    CK(cudaMalloc(&y, size_t(n) * n * 2));
    CK(cudaMalloc(&z, size_t(n) * n * 2));
    fill_bf16<<<1024, 256, 0, s>>>(x, size_t(n) * n, 1, 1.0f);
    fill_bf16<<<1024, 256, 0, s>>>(y, size_t(n) * n, 2, 1.0f);
    cublasHandle_t h;
    CKB(cublasCreate(&h));
    CKB(cublasSetStream(h, s));
    const float alpha = 1, beta = 0;
    const double gms = median_ms(s, 5, [&] {
      CKB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, x, CUDA_R_16BF, n, y, CUDA_R_16BF, n, &beta, z,
                       CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    bf16_tflops = 2.0 * n * double(n) * n / (gms * 1e-3) / 1e12;
    CKB(cublasDestroy(h));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(z));
  }
  std::printf("ceiling/d2d copy %.1f GB/s\nceiling/cublas bf16 gemm 8192^3 %.1f TFLOP/s\n", copy_gbs, bf16_tflops);

  const float mscale = 0.1f * std::log(40.0f) + 1.0f;
  const float scale = mscale * mscale / std::sqrt(192.0f);
  // The cases of hymoe-bench-gpu's mla_decode: uniform lengths, then one long sequence beside
  // seven (and 39) of 1K (sequence 0 the longest: the spot check's).
  std::vector<std::pair<std::vector<int>, std::string>> cases;
  for (const int len : {1024, 8192, 65536})
    for (const int batch : {1, 2, 4, 8})
      cases.push_back(
          {std::vector<int>(batch, len), "ctx=" + std::to_string(len) + " batch=" + std::to_string(batch)});
  for (const int len : {8192, 65536}) {
    std::vector<int> mixed(8, 1024);
    mixed[0] = len;
    cases.push_back({mixed, "ctx=" + std::to_string(len) + "+7x1024 batch=8"});
  }
  {
    std::vector<int> near_wave(40, 1024);
    near_wave[0] = 65536;
    cases.push_back({near_wave, "ctx=65536+39x1024 batch=40"});
  }
  for (const auto& [case_lens, label] : cases) {
    if (label.find(only) == std::string::npos) continue;
    {
      const int len = case_lens[0], batch = static_cast<int>(case_lens.size());
      double total_tokens = 0;
      for (const int l : case_lens) total_tokens += l;
      const int per_seq = (len + kPage - 1) / kPage, num_blocks = batch * per_seq;
      __nv_bfloat16 *q, *kc, *out;
      float *lse, *lse_acc, *o_acc;
      int *table, *lens, *splits;
      DecodingSchedMeta* meta;
      const int sm_parts = std::max(sms / 1 / ((kHeads + 63) / 64), 1), total_splits = batch + sm_parts;
      CK(cudaMalloc(&q, size_t(batch) * kHeads * kDk * 2));
      CK(cudaMalloc(&kc, size_t(num_blocks) * kPage * kDk * 2));
      CK(cudaMalloc(&out, size_t(batch) * kHeads * kDv * 2));
      CK(cudaMalloc(&lse, size_t(batch) * kHeads * 4));
      CK(cudaMalloc(&lse_acc, size_t(total_splits) * kHeads * 4));
      CK(cudaMalloc(&o_acc, size_t(total_splits) * kHeads * kDv * 4));
      CK(cudaMalloc(&table, size_t(num_blocks) * 4));
      CK(cudaMalloc(&lens, size_t(batch) * 4));
      CK(cudaMalloc(&splits, size_t(batch + 1) * 4));
      CK(cudaMalloc(&meta, size_t(sm_parts) * sizeof(DecodingSchedMeta)));
      fill_bf16<<<1024, 256, 0, s>>>(q, size_t(batch) * kHeads * kDk, 7, 1.0f);
      fill_bf16<<<1024, 256, 0, s>>>(kc, size_t(num_blocks) * kPage * kDk, 11, 1.0f);
      std::vector<int> host_table(num_blocks), host_lens(case_lens);
      for (int i = 0; i < num_blocks; ++i) host_table[i] = i;  // sequence b: blocks b * per_seq ..
      CK(cudaMemcpyAsync(table, host_table.data(), host_table.size() * 4, cudaMemcpyHostToDevice, s));
      CK(cudaMemcpyAsync(lens, host_lens.data(), host_lens.size() * 4, cudaMemcpyHostToDevice, s));

      GetDecodeSchedMetaParams mp = {batch, 1, 64, 5, -1, -1, nullptr, nullptr, lens, meta, splits, sm_parts, s};
      DenseAttnDecodeParams p{};
      p.b = batch;
      p.s_q = 1;
      p.q_seq_per_hk = kHeads;
      p.seqlens_k_ptr = lens;
      p.h_q = kHeads;
      p.h_k = 1;
      p.num_blocks = num_blocks;
      p.q_head_per_hk = kHeads;
      p.is_causal = false;
      p.d = kDk;
      p.d_v = kDv;
      p.scale_softmax = scale;
      p.scale_softmax_log2 = float(scale * M_LOG2E);
      p.q_ptr = q;
      p.k_ptr = kc;
      p.o_ptr = out;
      p.softmax_lse_ptr = lse;
      // Strides in elements: q [b][128 rows][1 head][576], cache [blocks][64][1][576], out [b][1][128][512].
      p.q_batch_stride = int64_t(kHeads) * kDk;
      p.q_row_stride = kDk;
      p.q_head_stride = kDk;
      p.k_batch_stride = int64_t(kPage) * kDk;
      p.k_row_stride = kDk;
      p.k_head_stride = kDk;
      p.o_batch_stride = int64_t(kHeads) * kDv;
      p.o_row_stride = kDv;
      p.o_head_stride = int64_t(kHeads) * kDv;
      p.block_table = table;
      p.block_table_batch_stride = per_seq;
      p.page_block_size = kPage;
      p.tile_scheduler_metadata_ptr = meta;
      p.num_sm_parts = sm_parts;
      p.num_splits_ptr = splits;
      p.total_num_splits = total_splits;
      p.softmax_lseaccum_ptr = lse_acc;
      p.oaccum_ptr = o_acc;
      p.stream = s;
      CombineParams cp = {batch, 1, kHeads, kDv, lse, out, kHeads, kHeads, kHeads * kDv, kHeads * kDv, kDv,
                          lse_acc, o_acc, kHeads, kHeads, kHeads * kDv, kHeads * kDv, kDv,
                          meta, splits, sm_parts, nullptr, s};
      auto attend = [&] {
        sm90::run_flash_splitkv_mla_kernel<cutlass::bfloat16_t>(p);
        smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(cp);
      };
      smxx::decode::run_get_decoding_sched_meta_kernel(mp);
      attend();
      CK(cudaStreamSynchronize(s));
      CK(cudaGetLastError());

      // Spot check: heads 0, 37, 90, 127 of sequence 0 (its blocks are 0 .. per_seq - 1).
      std::vector<uint16_t> hq(size_t(kHeads) * kDk), hk(size_t(len) * kDk), ho(size_t(kHeads) * kDv);
      CK(cudaMemcpy(hq.data(), q, hq.size() * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hk.data(), kc, hk.size() * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(ho.data(), out, ho.size() * 2, cudaMemcpyDeviceToHost));
      double max_err = 0, max_ref = 0;
      for (const int head : {0, 37, 90, 127}) {
        std::vector<double> sc(len), acc(kDv, 0.0);
        double mx = -1e300;
        for (int t = 0; t < len; ++t) {
          double d = 0;
          for (int i = 0; i < kDk; ++i) d += double(bf16f(hq[size_t(head) * kDk + i])) * bf16f(hk[size_t(t) * kDk + i]);
          sc[t] = d * scale;
          mx = std::max(mx, sc[t]);
        }
        double sum = 0;
        for (int t = 0; t < len; ++t) {
          const double w = std::exp(sc[t] - mx);
          sum += w;
          for (int i = 0; i < kDv; ++i) acc[i] += w * bf16f(hk[size_t(t) * kDk + i]);
        }
        for (int i = 0; i < kDv; ++i) {
          const double ref = acc[i] / sum;
          max_ref = std::max(max_ref, std::fabs(ref));
          max_err = std::max(max_err, std::fabs(ref - bf16f(ho[size_t(head) * kDv + i])));
        }
      }

      const double ms = steady ? 0.0 : median_ms(s, 20, attend);
      const double ms_meta = steady ? 0.0 : median_ms(s, 20, [&] {
        smxx::decode::run_get_decoding_sched_meta_kernel(mp);
        attend();
      });
      // 8 calls (as 8 layers of a decode step) captured in one CUDA graph and replayed, per call:
      // as hymoe-bench-gpu's ",graph" rows (without the host's launch rate).
      constexpr int kGraphCalls = 8;
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kGraphCalls; ++i) attend();
      CK(cudaStreamEndCapture(s, &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      auto replay = [&] { CK(cudaGraphLaunch(exec, s)); };
      double mhz = 0;  // (steady: the SM clock it ran at)
      const double ms_graph = (steady ? steady_ms(s, replay, &mhz) : median_ms(s, 20, replay)) / kGraphCalls;
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(graph));
      CK(cudaGetLastError());
      const double bytes = total_tokens * kDk * 2, flops = 2.0 * kHeads * total_tokens * (kDk + kDv);
      struct Row {
        const char* tag;
        double t, mhz;  // ms a call; the SM clock it ran at (0: not read)
      };
      for (const auto& [tag, t, row_mhz] :
           {Row{"", ms, 0}, Row{"+meta", ms_meta, 0}, Row{steady ? ",steady" : ",graph", ms_graph, mhz}}) {
        if (t <= 0) continue;  // (not timed: --steady)
        std::printf("mla_decode[flashmla%s]/%s  %.3f us  %.1f GB/s  %.1f%% of d2d copy  %.1f TFLOP/s  "
                    "%.1f%% of bf16 gemm  (spot check max err %.2e of max %.2e)",
                    tag, label.c_str(), t * 1e3, bytes / (t * 1e-3) / 1e9, 100.0 * bytes / (t * 1e-3) / 1e9 / copy_gbs,
                    flops / (t * 1e-3) / 1e12, 100.0 * flops / (t * 1e-3) / 1e12 / bf16_tflops, max_err, max_ref);
        if (row_mhz > 0) std::printf("  at %.0f MHz", row_mhz);
        std::printf("\n");
      }
      for (void* ptr : {(void*)q, (void*)kc, (void*)out, (void*)lse, (void*)lse_acc, (void*)o_acc, (void*)table,
                        (void*)lens, (void*)splits, (void*)meta})
        CK(cudaFree(ptr));
    }
  }
  CK(cudaStreamDestroy(s));
  return 0;
}
