// Side-by-side driver for a peer (docs/experiments.md, grouped expert GEMM): DeepGEMM's SM90
// 1D2D m-grouped contiguous FP8 GEMM (block-scaled like hymoe's grouped GEMM: FP8 E4M3 operands,
// per-token x 128-column activation scales, 128 x 128 weight scales, BF16 out) on the routing
// of hymoe-bench-gpu's `moe` section (mt19937_64(42), top 8 of 256 experts, 4K / 16K / 64K
// tokens drawn in that order), gate + up + down of a DeepSeek-V3 layer, TFLOP/s of the useful
// rows (hymoe's FLOP count; DeepGEMM also computes each expert's rows padded to 128). Spot-checks
// 64 outputs of the gate and down GEMMs against a host dot product of the decoded operands.
// Timing: the best and the median of 5 batches of 4 calls, then the layer in the GPU's steady
// state (0.5 s of load, median of 7 batches of >= 40 ms), as hymoe-bench-gpu's steady records.
// Not part of hymoe's build: the peer is fetched and built outside the project, never committed.
// Build (a DeepGEMM checkout at 54e2261 with its CUTLASS submodule at f3fde58), sm_90a:
//   bench/gpu/peers/build-deepgemm-driver $DG $CUTLASS   (-> .carry/peer/dg_bench)
// Run: dg_bench [tokens [config]] (config: bn128, bn128,mcA, bn128,mcB, bn192,mcA, bn160,mcA,
// bn144,mcA: BLOCK_N and a 2-CTA TMA multicast of A or B).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)
#define CKD(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
  std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, int(r_)); std::exit(1); } } while (0)

constexpr int kExperts = 256, kTopK = 8, kHidden = 7168, kInter = 2048, kSms = 132;

__global__ void fill_u8(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = uint8_t(h & 0xf7);  // never 0x7f / 0xff (NaN codes)
  }
}
__global__ void fill_f32(float* p, size_t n, uint32_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = lo + (hi - lo) * float(h & 0xffffff) / float(0x1000000);
  }
}

static float e4m3(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const float v = e == 0 ? std::ldexp(float(m) / 8.0f, -6) : std::ldexp(1.0f + float(m) / 8.0f, e - 7);
  return s ? -v : v;
}
static float bf16f(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }

static PFN_cuTensorMapEncodeTiled_v12000 encode() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&fn), 12000,
                                        cudaEnableDefault, &q));
  }
  return fn;
}
static CUtensorMap map2d(void* p, CUtensorMapDataType dt, int esz, uint64_t inner, uint64_t outer,
                         uint64_t stride_elems, uint32_t box_inner, uint32_t box_outer, int swizzle) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {stride_elems * esz};
  const cuuint32_t box[2] = {swizzle ? uint32_t(swizzle / esz) : box_inner, box_outer};
  const cuuint32_t es[2] = {1, 1};
  const CUtensorMapSwizzle sw = swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE;
  CKD(encode()(&m, dt, 2, p, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

struct Problem {  // one grouped GEMM: D[M_pad, n] = A[M_pad, k] * B[g n, k]^T
  uint8_t *a, *b; float *sfa, *sfb; uint16_t* d; int* idx; int m_pad, n, k;
};

template <int BN, int MC, bool OnA, int N, int K>
struct Cfg {
  static constexpr int kSwD = (BN * 2) % 128 == 0 ? 128 : (BN * 2) % 64 == 0 ? 64 : 32;
  static constexpr int kSfb = ((K + 127) / 128 * (128 % BN == 0 ? 1 : 2) * 4 + 7) / 8 * 8;
  static constexpr int kExtra = (128 * BN * 2 + 1023) / 1024 * 1024 + 16 * 8 * 2 + kSfb;
  static constexpr int kPerStage = 128 * 128 + BN * 128 + 512;
  static constexpr int kStages = (232448 - kExtra) / kPerStage > 16 ? 16 : (232448 - kExtra) / kPerStage;
  static constexpr int kSmem = kExtra + kStages * kPerStage;
};

template <int BN, int MC, bool OnA, int N, int K>
static void launch(const Problem& p, cudaStream_t s) {
  using C = Cfg<BN, MC, OnA, N, K>;
  auto kern = &deep_gemm::sm90_fp8_gemm_1d2d_impl<
      cute::UMMA::Major::K, 0, N, K, kExperts, 128, BN, 128, 128, 128, C::kSwD, C::kStages, 128, 256,
      MC, OnA, kSms, deep_gemm::GemmType::MGroupedContiguous, cutlass::bfloat16_t,
      deep_gemm::epilogue::transform::EpilogueIdentity>;
  static bool init = false;
  if (!init) {
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    init = true;
  }
  const int m_al = (p.m_pad + 3) / 4 * 4;
  const CUtensorMap ma = map2d(p.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, K, p.m_pad, K, 128, 128, 128);
  const CUtensorMap mb = map2d(p.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, K, uint64_t(N) * kExperts, K, 128, BN, 128);
  const CUtensorMap md = map2d(p.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, N, p.m_pad, N, BN, 128, C::kSwD);
  const CUtensorMap msfa = map2d(p.sfa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, m_al, (K + 127) / 128, m_al, 128, 1, 0);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(kSms);
  cfg.blockDim = dim3(384);
  cfg.dynamicSmemBytes = C::kSmem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = MC;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, kern, p.sfb, p.idx, uint32_t(p.m_pad), uint32_t(N), uint32_t(K),
                        *reinterpret_cast<const cute::TmaDescriptor*>(&ma),
                        *reinterpret_cast<const cute::TmaDescriptor*>(&mb),
                        *reinterpret_cast<const cute::TmaDescriptor*>(&md),
                        *reinterpret_cast<const cute::TmaDescriptor*>(&msfa)));
}

// Spot check: 64 random useful (row, col) entries against a host dot product of the decoded
// operands with the block scales (FP32 on the host; DeepGEMM promotes per 128-K block).
static double check(const Problem& p, const std::vector<int>& idx_host, std::mt19937_64& rng) {
  double worst = 0;
  std::vector<uint8_t> arow(p.k), brow(p.k);
  const int kb = (p.k + 127) / 128, nb = (p.n + 127) / 128, m_al = (p.m_pad + 3) / 4 * 4;
  for (int t = 0; t < 64; ++t) {
    int r;
    do { r = int(rng() % p.m_pad); } while (idx_host[r] < 0);
    const int e = idx_host[r], c = int(rng() % p.n);
    CK(cudaMemcpy(arow.data(), p.a + size_t(r) * p.k, p.k, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(brow.data(), p.b + (size_t(e) * p.n + c) * p.k, p.k, cudaMemcpyDeviceToHost));
    std::vector<float> sa(kb), sb(kb);
    for (int j = 0; j < kb; ++j) {
      CK(cudaMemcpy(&sa[j], p.sfa + size_t(j) * m_al + r, 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(&sb[j], p.sfb + (size_t(e) * nb + c / 128) * kb + j, 4, cudaMemcpyDeviceToHost));
    }
    double ref = 0, mag = 0;
    for (int j = 0; j < kb; ++j) {
      double part = 0, pm = 0;
      for (int x = j * 128; x < std::min(p.k, j * 128 + 128); ++x) {
        part += double(e4m3(arow[x])) * e4m3(brow[x]);
        pm += std::fabs(double(e4m3(arow[x])) * e4m3(brow[x]));
      }
      ref += part * sa[j] * sb[j];
      mag += pm * sa[j] * sb[j];
    }
    uint16_t got;
    CK(cudaMemcpy(&got, p.d + size_t(r) * p.n + c, 2, cudaMemcpyDeviceToHost));
    worst = std::max(worst, std::fabs(bf16f(got) - ref) / (mag + 1e-30));
  }
  return worst;
}

static const char* g_only_cfg = nullptr;
template <int BN, int MC, bool OnA>
static void run_cfg(const char* name, Problem* g, Problem* u, Problem* dn, int tokens, double flops,
                    const std::vector<int>& idx_host, cudaStream_t s) {
  if (g_only_cfg && std::strcmp(g_only_cfg, name) != 0) return;
  auto step = [&] {
    launch<BN, MC, OnA, kInter, kHidden>(*g, s);
    launch<BN, MC, OnA, kInter, kHidden>(*u, s);
    launch<BN, MC, OnA, kHidden, kInter>(*dn, s);
  };
  step();
  CK(cudaStreamSynchronize(s));
  CK(cudaGetLastError());
  std::mt19937_64 rng(7);
  const double err = std::max(check(*g, idx_host, rng), check(*dn, idx_host, rng));
  // 5 batches of 4 calls of fn, milliseconds per call: the best batch and the median one
  // (hymoe-bench-gpu reports the median of its batches).
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  struct Timing {
    float best, median;
  };
  auto time_ms = [&](const auto& fn) {
    std::array<float, 5> per_call{};
    for (float& t : per_call) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < 4; ++i) fn();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t = ms / 4;
    }
    std::sort(per_call.begin(), per_call.end());
    return Timing{per_call[0], per_call[2]};
  };
  const Timing layer = time_ms(step);
  // The layer in the power-limited steady state, as hymoe-bench-gpu's "steady state" records:
  // 0.5 s of back-to-back calls, then the median of 7 batches of >= 40 ms.
  float steady = 0.0f;
  {
    float settled = 0.0f, once = 1e30f;
    while (settled < 500.0f) {
      CK(cudaEventRecord(e0, s));
      step();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      settled += ms;
      once = std::min(once, ms);
    }
    const int reps = std::clamp(static_cast<int>(40.0f / once), 2, 400);
    std::array<float, 7> per_call{};
    for (float& t : per_call) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < reps; ++i) step();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t = ms / reps;
    }
    std::sort(per_call.begin(), per_call.end());
    steady = per_call[3];
  }
  // Each projection alone: gate (k 7168) and down (k 2048).
  const Timing g_ms = time_ms([&] { launch<BN, MC, OnA, kInter, kHidden>(*g, s); });
  const Timing d_ms = time_ms([&] { launch<BN, MC, OnA, kHidden, kInter>(*dn, s); });
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  auto tflops = [&](double f, float ms) { return f / (ms * 1e-3) / 1e12; };
  std::printf("deepgemm_m_grouped_contiguous[%s]/%d tokens: gate alone %.1f TFLOP/s, down alone %.1f TFLOP/s "
              "(best batch; median %.1f, %.1f)\n",
              name, tokens, tflops(flops / 3, g_ms.best), tflops(flops / 3, d_ms.best), tflops(flops / 3, g_ms.median),
              tflops(flops / 3, d_ms.median));
  std::printf("deepgemm_m_grouped_contiguous[%s]/%d tokens x top8 (gate+up+down)  %.1f TFLOP/s  (%.3f ms, best batch; "
              "median %.1f TFLOP/s; max |err| / sum|terms| %.2e)\n",
              name, tokens, tflops(flops, layer.best), layer.best, tflops(flops, layer.median), err);
  std::printf("deepgemm_m_grouped_contiguous[%s]/%d tokens x top8 (gate+up+down), steady state  %.1f TFLOP/s\n", name,
              tokens, tflops(flops, steady));
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? std::atoi(argv[1]) : 0;  // one token count, or all
  if (argc > 2) g_only_cfg = argv[2];                   // one configuration, or all
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const size_t wbytes = size_t(kInter) * kHidden * kExperts;
  uint8_t *wg, *wu, *wd;
  float *sg, *su, *sd;
  CK(cudaMalloc(&wg, wbytes));
  CK(cudaMalloc(&wu, wbytes));
  CK(cudaMalloc(&wd, wbytes));
  const size_t sgn = size_t(kExperts) * (kInter / 128) * (kHidden / 128);
  CK(cudaMalloc(&sg, sgn * 4));
  CK(cudaMalloc(&su, sgn * 4));
  CK(cudaMalloc(&sd, sgn * 4));
  fill_u8<<<1024, 256, 0, s>>>(wg, wbytes, 1);
  fill_u8<<<1024, 256, 0, s>>>(wu, wbytes, 2);
  fill_u8<<<1024, 256, 0, s>>>(wd, wbytes, 3);
  fill_f32<<<256, 256, 0, s>>>(sg, sgn, 4, 0.0005f, 0.004f);
  fill_f32<<<256, 256, 0, s>>>(su, sgn, 5, 0.0005f, 0.004f);
  fill_f32<<<256, 256, 0, s>>>(sd, sgn, 6, 0.0005f, 0.004f);
  std::mt19937_64 rng(42);  // hymoe-bench-gpu's moe routing, token counts in the same order
  for (int tokens = 4096; tokens <= 65536; tokens *= 4) {
    std::vector<int> count(kExperts, 0);
    std::vector<int> pool(kExperts);
    std::iota(pool.begin(), pool.end(), 0);
    for (int t = 0; t < tokens; ++t) {
      for (int j = 0; j < kTopK; ++j) std::swap(pool[j], pool[j + rng() % (kExperts - j)]);
      for (int j = 0; j < kTopK; ++j) ++count[pool[j]];
    }
    if (only && tokens != only) continue;
    std::vector<int> idx;
    for (int e = 0; e < kExperts; ++e) {
      const int padded = (count[e] + 127) / 128 * 128;
      for (int r = 0; r < padded; ++r) idx.push_back(r < count[e] ? e : -1);
    }
    const int m_pad = int(idx.size()), m_al = (m_pad + 3) / 4 * 4;
    int* didx;
    CK(cudaMalloc(&didx, idx.size() * 4));
    CK(cudaMemcpy(didx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    uint8_t *a, *h;
    float *sa, *sh;
    uint16_t *dg, *du, *dd;
    CK(cudaMalloc(&a, size_t(m_pad) * kHidden));
    CK(cudaMalloc(&h, size_t(m_pad) * kInter));
    CK(cudaMalloc(&sa, size_t(m_al) * (kHidden / 128) * 4));
    CK(cudaMalloc(&sh, size_t(m_al) * (kInter / 128) * 4));
    CK(cudaMalloc(&dg, size_t(m_pad) * kInter * 2));
    CK(cudaMalloc(&du, size_t(m_pad) * kInter * 2));
    CK(cudaMalloc(&dd, size_t(m_pad) * kHidden * 2));
    fill_u8<<<1024, 256, 0, s>>>(a, size_t(m_pad) * kHidden, 7);
    fill_u8<<<1024, 256, 0, s>>>(h, size_t(m_pad) * kInter, 8);
    fill_f32<<<256, 256, 0, s>>>(sa, size_t(m_al) * (kHidden / 128), 9, 0.001f, 0.01f);
    fill_f32<<<256, 256, 0, s>>>(sh, size_t(m_al) * (kInter / 128), 10, 0.001f, 0.01f);
    Problem pg{a, wg, sa, sg, dg, didx, m_pad, kInter, kHidden};
    Problem pu{a, wu, sa, su, du, didx, m_pad, kInter, kHidden};
    Problem pd{h, wd, sh, sd, dd, didx, m_pad, kHidden, kInter};
    const double flops = 2.0 * tokens * kTopK * 3.0 * kInter * kHidden;
    std::printf("tokens %d: %d rows, %d padded to 128 per expert (%.1f%% padding)\n", tokens, tokens * kTopK,
                m_pad, 100.0 * (m_pad - tokens * kTopK) / m_pad);
    run_cfg<128, 1, true>("bn128", &pg, &pu, &pd, tokens, flops, idx, s);
    run_cfg<128, 2, true>("bn128,mcA", &pg, &pu, &pd, tokens, flops, idx, s);
    run_cfg<128, 2, false>("bn128,mcB", &pg, &pu, &pd, tokens, flops, idx, s);
    run_cfg<192, 2, true>("bn192,mcA", &pg, &pu, &pd, tokens, flops, idx, s);
    run_cfg<160, 2, true>("bn160,mcA", &pg, &pu, &pd, tokens, flops, idx, s);
    run_cfg<144, 2, true>("bn144,mcA", &pg, &pu, &pd, tokens, flops, idx, s);
    for (void* q : {(void*)didx, (void*)a, (void*)h, (void*)sa, (void*)sh, (void*)dg, (void*)du, (void*)dd}) CK(cudaFree(q));
  }
  return 0;
}
