// Hopper warpgroup MMA (wgmma) building blocks, sm_90a only. Elsewhere (the sm_120 pass, the
// host pass) the bodies compile to a trap: the host launches the wgmma kernels only where
// fp8_block_gemm_wgmma_supported() (compute capability 9.0, sm_90a in the build).
//   wgmma_fence           wgmma.fence: before the first wgmma of a group whose accumulator
//                         registers other instructions touched
//   fence_proxy_async     makes this thread's generic-proxy shared-memory writes (st.shared,
//                         cp.async once waited for) visible to the async proxy wgmma reads through
//   wgmma_commit / wgmma_wait<N>: close the group of issued wgmmas / wait until <= N in flight
//   wgmma_m64n128k32_e4m3 D[64 x 128] (+)= A[64 x 32] * B[128 x 32]^T, FP8 E4M3 operands in
//                         shared memory by descriptor (wgmma_layout.h), FP32 D in 64 registers
//                         per thread; accumulate = false overwrites D.
//   wgmma_m64n64k32_e4m3  the same with N = 64 (32 registers): the half tiles of
//                         kWgmmaWsTmaGroupedScXH.
//   wgmma_m64n192k32_e4m3 the same with N = 192 (96 registers): kWgmmaWsTmaGroupedScMW's tiles.
#pragma once

#include <cstdint>

#include "mbarrier.cuh"

namespace hymoe::gpu::kernels {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HYMOE_WGMMA_ENABLED 1
#endif

// A wgmma's accumulator operands: HYMOE_WGMMA_D<n> lists "+f"(d[0]) .. "+f"(d[n - 1]) (the
// function's FP32 array d), HYMOE_WGMMA_R<n> the PTX text naming them, "%0,%1,..,%<n - 1>"; the
// other operands follow from %<n>.
#define HYMOE_WGMMA_D8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define HYMOE_WGMMA_D16(i) HYMOE_WGMMA_D8(i), HYMOE_WGMMA_D8(i + 8)
#define HYMOE_WGMMA_D32 HYMOE_WGMMA_D16(0), HYMOE_WGMMA_D16(16)
#define HYMOE_WGMMA_D64 HYMOE_WGMMA_D32, HYMOE_WGMMA_D16(32), HYMOE_WGMMA_D16(48)
#define HYMOE_WGMMA_D96 HYMOE_WGMMA_D64, HYMOE_WGMMA_D16(64), HYMOE_WGMMA_D16(80)
#define HYMOE_WGMMA_D128 HYMOE_WGMMA_D96, HYMOE_WGMMA_D16(96), HYMOE_WGMMA_D16(112)
#define HYMOE_WGMMA_R16 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
#define HYMOE_WGMMA_R32 HYMOE_WGMMA_R16 "," \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define HYMOE_WGMMA_R64 HYMOE_WGMMA_R32 "," \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define HYMOE_WGMMA_R96 HYMOE_WGMMA_R64 "," \
  "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79," \
  "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
#define HYMOE_WGMMA_R128 HYMOE_WGMMA_R96 "," \
  "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111," \
  "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"

__device__ __forceinline__ void wgmma_fence() {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void fence_proxy_async() {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  __trap();
#endif
}

// Keeps the compiler from moving reads or writes of the accumulators across the asynchronous
// wgmma (the registers are in flight between issue and wgmma_wait). N: 64 (m64n128) or 32
// (m64n64).
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// --- TMA (mbarriers, mbarrier_arrive_expect_tx and bulk copies are in mbarrier.cuh) ---
// TMA: one thread announces the bytes a phase of bar will receive (and arrives), then issues
// tensor copies that complete those bytes on bar. tma_load_2d copies the box at coordinates
// (c0: innermost, c1) of the tensor map (a __grid_constant__ kernel parameter) to shared
// address dst, in the map's swizzle; elements outside the tensor are zero-filled and counted.
__device__ __forceinline__ void tma_load_2d([[maybe_unused]] uint32_t dst, [[maybe_unused]] const void* map,
                                            [[maybe_unused]] uint32_t bar, [[maybe_unused]] int c0,
                                            [[maybe_unused]] int c1) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
#else
  __trap();
#endif
}

// The same box delivered to every CTA of the cluster named in cta_mask (bit r: rank r), at the
// same shared offset dst in each, completing its bytes on the barrier at offset bar in each.
__device__ __forceinline__ void tma_load_2d_multicast([[maybe_unused]] uint32_t dst, [[maybe_unused]] const void* map,
                                                      [[maybe_unused]] uint32_t bar, [[maybe_unused]] int c0,
                                                      [[maybe_unused]] int c1, [[maybe_unused]] uint16_t cta_mask) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
#else
  __trap();
#endif
}

// --- thread block clusters ---
//   cluster_rank()             this CTA's rank in its cluster (%cluster_ctarank)
//   cluster_index(), clusters()  the cluster's index in the grid and their count (x only)
//   cluster_sync()             barrier.cluster arrive (release) + wait (acquire), all threads
//   mbarrier_arrive_peer(bar, rank)  an arrival on the barrier at shared offset bar of CTA rank
//                              (release at CTA scope, the default, as CUTLASS's ClusterBarrier:
//                              the arrivals only say this CTA's wgmmas are done reading a slot,
//                              which wgmma.wait_group already ordered; .release.cluster made
//                              ptxas put a MEMBAR before every arrival, 35% of the
//                              consumers' stall cycles by ncu)
// The three special registers behind them, one mov each.
enum class ClusterReg { kRank, kIndex, kCount };
template <ClusterReg kReg>
__device__ __forceinline__ uint32_t cluster_reg() {
  uint32_t r = 0;
#if defined(HYMOE_WGMMA_ENABLED)
  if constexpr (kReg == ClusterReg::kRank) {
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  } else if constexpr (kReg == ClusterReg::kIndex) {
    asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  } else {
    asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  }
#else
  __trap();
#endif
  return r;
}
__device__ __forceinline__ uint32_t cluster_rank() { return cluster_reg<ClusterReg::kRank>(); }
__device__ __forceinline__ int cluster_index() { return static_cast<int>(cluster_reg<ClusterReg::kIndex>()); }
__device__ __forceinline__ int clusters() { return static_cast<int>(cluster_reg<ClusterReg::kCount>()); }
__device__ __forceinline__ void cluster_sync() {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void mbarrier_arrive_peer(uint32_t bar, uint32_t rank) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
#else
  (void)bar;
  (void)rank;
  __trap();
#endif
}

// A tensor map in global memory written by a host copy before the launch (the grouped GEMM's
// per-expert weight maps): the tensormap proxy must acquire it before a TMA reads it (PTX:
// fence.proxy.tensormap::generic; .sys because the host wrote it, the CUDA programming guide's
// rule for maps copied with cudaMemcpy), then a prefetch into the tensor-map cache.
__device__ __forceinline__ void tensormap_acquire(const void* map) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n"
      "prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map))
      : "memory");
#else
  (void)map;
  __trap();
#endif
}

// The thread's warpgroup (threadIdx.x / 128) through a shuffle from lane 0, so that ptxas knows
// it is the same over the warp: what derives from it (the consumers' shared-memory descriptors,
// branches holding wgmmas) then lives in uniform registers. Without it the grouped kernel moved
// each descriptor with 4 R2UR per wgmma and ran 5-10% slower at 16K-64K tokens (H200,
// docs/experiments.md). Call with the whole warp converged.
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

// --- register reallocation (the warp-specialised kernel) ---
//   setmaxnreg_inc/dec<N>       the warpgroup's per-thread register budget (multiple of 8)
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  __trap();
#endif
}

template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a,
                                                      uint64_t desc_b, bool accumulate) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      HYMOE_WGMMA_R64
      "}, %64, %65, p, 1, 1;\n"
      "}\n"
      : HYMOE_WGMMA_D64
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d;
  (void)desc_a;
  (void)desc_b;
  (void)accumulate;
  __trap();
#endif
}

// BF16 wgmma of MLA decode (mla_decode_wgmma.cuh), FP32 accumulators:
//   wgmma_m64n64k16_bf16_ss    D[64 x 64] (+)= A[64 x 16] * B[64 x 16]^T, both K-major in shared
//                              memory by descriptor (32 registers per thread)
//   wgmma_m64n64k16_bf16_rs    the same with A in registers (as below)
//   wgmma_m64n256k16_bf16_rs_t D[64 x 256] += A[64 x 16] * B[16 x 256], A in registers (four
//                              BF16x2 per thread, mma.sync's m16n8k16 A fragment per warp), B
//                              MN-major ("transposed": N contiguous) in shared memory by descriptor
//                              (128 registers per thread)
__device__ __forceinline__ void wgmma_m64n64k16_bf16_ss(float (&d)[32], uint64_t desc_a,
                                                        uint64_t desc_b, bool accumulate) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      HYMOE_WGMMA_R32
      "}, %32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : HYMOE_WGMMA_D32
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d;
  (void)desc_a;
  (void)desc_b;
  (void)accumulate;
  __trap();
#endif
}

// D[64 x 64] (+)= A[64 x 16] * B[64 x 16]^T, A in registers (mma.sync's m16n8k16 A fragment per
// warp, as wgmma_m64n256k16_bf16_rs_t), B K-major in shared memory by descriptor.
__device__ __forceinline__ void wgmma_m64n64k16_bf16_rs(float (&d)[32], const uint32_t (&a)[4],
                                                        uint64_t desc_b, bool accumulate) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      HYMOE_WGMMA_R32
      "}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n"
      "}\n"
      : HYMOE_WGMMA_D32
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),
        "r"(static_cast<int>(accumulate)));
#else
  (void)d;
  (void)a;
  (void)desc_b;
  (void)accumulate;
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n256k16_bf16_rs_t(float (&d)[128], const uint32_t (&a)[4],
                                                           uint64_t desc_b) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      HYMOE_WGMMA_R128
      "}, {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n"
      "}\n"
      : HYMOE_WGMMA_D128
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
#else
  (void)d;
  (void)a;
  (void)desc_b;
  __trap();
#endif
}

//   wgmma_m64n32k16_bf16_ss    D[64 x 32] (+)= A[64 x 16] * B[32 x 16]^T, both K-major in shared
//                              memory (16 registers per thread)
//   wgmma_m64n256k16_bf16_ss_t D[64 x 256] += A[64 x 16] * B[16 x 256], A K-major and B MN-major
//                              in shared memory (128 registers per thread)
__device__ __forceinline__ void wgmma_m64n32k16_bf16_ss(float (&d)[16], uint64_t desc_a,
                                                        uint64_t desc_b, bool accumulate) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      HYMOE_WGMMA_R16
      "}, %16, %17, p, 1, 1, 0, 0;\n"
      "}\n"
      : HYMOE_WGMMA_D16(0)
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d;
  (void)desc_a;
  (void)desc_b;
  (void)accumulate;
  __trap();
#endif
}

__device__ __forceinline__ void wgmma_m64n256k16_bf16_ss_t(float (&d)[128], uint64_t desc_a,
                                                           uint64_t desc_b) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      HYMOE_WGMMA_R128
      "}, %128, %129, p, 1, 1, 0, 1;\n"
      "}\n"
      : HYMOE_WGMMA_D128
      : "l"(desc_a), "l"(desc_b), "r"(1));
#else
  (void)d;
  (void)desc_a;
  (void)desc_b;
  __trap();
#endif
}

// wgmma_hold for any accumulator size.
template <int N>
__device__ __forceinline__ void wgmma_hold_n(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_m64n64k32_e4m3(float (&d)[32], uint64_t desc_a,
                                                     uint64_t desc_b, bool accumulate) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {"
      HYMOE_WGMMA_R32
      "}, %32, %33, p, 1, 1;\n"
      "}\n"
      : HYMOE_WGMMA_D32
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d;
  (void)desc_a;
  (void)desc_b;
  (void)accumulate;
  __trap();
#endif
}

// m64n192k32: D[64 x 192] (+)= A[64 x 32] * B[192 x 32]^T (96 registers per thread): the 128 x
// 192 tiles of kWgmmaWsTmaGroupedScMW.
__device__ __forceinline__ void wgmma_m64n192k32_e4m3(float (&d)[96], uint64_t desc_a,
                                                      uint64_t desc_b, bool accumulate) {
#if defined(HYMOE_WGMMA_ENABLED)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
      HYMOE_WGMMA_R96
      "}, %96, %97, p, 1, 1;\n"
      "}\n"
      : HYMOE_WGMMA_D96
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
#else
  (void)d;
  (void)desc_a;
  (void)desc_b;
  (void)accumulate;
  __trap();
#endif
}

#undef HYMOE_WGMMA_D8
#undef HYMOE_WGMMA_D16
#undef HYMOE_WGMMA_D32
#undef HYMOE_WGMMA_D64
#undef HYMOE_WGMMA_D96
#undef HYMOE_WGMMA_D128
#undef HYMOE_WGMMA_R16
#undef HYMOE_WGMMA_R32
#undef HYMOE_WGMMA_R64
#undef HYMOE_WGMMA_R96
#undef HYMOE_WGMMA_R128

}  // namespace hymoe::gpu::kernels
