// Sampling: one 1024-thread block per row. Selection thresholds are found by bisection over the
// order-preserving integer image of FP32 values (32 block-wide counting passes), so no sort is
// needed (the top_p threshold by a 3-pass radix select over the probabilities' bits, with
// fixed-point mass in 32-bit limbs, the digit found by a block scan over the bins); tie ranks
// are block scans; the draw is a prefix sum over per-thread id segments. Ties at the top_k and top_p cuts are
// kept in id order, as the CPU sampler's stable order keeps them: each cut ends at the id of the
// last tie kept, so whether an id is kept is a pure function of its key and id.
#pragma once

#include "common.cuh"
#include "hymoe/common/sampling_random.h"
#include "hymoe/gpu/sampling.h"

namespace hymoe::gpu::kernels {

inline constexpr int kSampleThreads = 1024;

// Monotone map float -> uint32 (a < b  <=>  key(a) < key(b)); -inf is the smallest real key.
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ float clean(float v) { return v != v ? -INFINITY : v; }

__device__ int block_count(int v, float* scratch) {
  return static_cast<int>(block_sum(static_cast<float>(v), scratch) + 0.5f);
}

// The upper midpoint of [lo, hi] (lo < hi). hi - lo + 1 would wrap to 0 for the full range
// [0, 2^32 - 1], leaving mid == lo forever: halve the difference and round up instead.
__device__ __forceinline__ uint32_t upper_mid(uint32_t lo, uint32_t hi) {
  const uint32_t d = hi - lo;
  return lo + (d >> 1) + (d & 1u);
}

// Largest key K such that count(key(x_i) >= K) >= want (x = logits): the want-th largest value.
template <typename Fn>
__device__ uint32_t bisect_kth(Fn&& count_at_least, int want) {
  uint32_t lo = 0, hi = 0xffffffffu;  // invariant: count(lo) >= want, answer in [lo, hi]
  while (lo < hi) {
    const uint32_t mid = upper_mid(lo, hi);
    if (count_at_least(mid) >= want) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Probability mass in fixed point (p <= 1 times 2^40): sums are exact and order-independent.
inline constexpr int kRadixBits = 10, kRadixBins = 1 << kRadixBits;
inline constexpr int kLimbBits = 14;
inline constexpr unsigned long long kLimbMask = (1ull << kLimbBits) - 1;
static_assert(kSamplingMaxVocab <= 1 << 18, "a limb's sum over the vocabulary < 2^32");
__device__ __forceinline__ unsigned long long fixed_mass(float p) {
  return __float2ull_rn(p * 0x1p40f);
}

// Block-wide sum of 64-bit integers (every thread gets it); *scratch is one shared word.
__device__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* scratch) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x == 0) *scratch = 0;
  __syncthreads();
  if (threadIdx.x % kWarpSize == 0) atomicAdd(scratch, v);
  __syncthreads();
  const unsigned long long total = *scratch;
  __syncthreads();
  return total;
}

// Block-wide inclusive prefix sum over threads (thread order), for a 1024-thread block: warp
// scans by shuffles, then a scan of the 32 warp totals. Exact for integers. Every thread of the
// block must call it (it synchronises); totals is a 32-element shared array.
template <typename T>
__device__ T block_inclusive_scan(T v, T* totals) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int o = 1; o < kWarpSize; o *= 2) {
    const T n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == kWarpSize - 1) totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < static_cast<int>(blockDim.x / kWarpSize) ? totals[lane] : T{0};
#pragma unroll
    for (int o = 1; o < kWarpSize; o *= 2) {
      const T n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    totals[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v += totals[warp - 1];
  __syncthreads();  // the next call may reuse totals
  return v;
}

// The id of the n-th (1-based, id order) element with is_tie(i), or 0x7fffffff when there are
// fewer than n: a block prefix count over per-thread contiguous id segments [begin, end). Every
// thread of the block must call it (it synchronises).
template <typename IsTie>
__device__ int nth_tie_id(IsTie&& is_tie, int n, int begin, int end, int* totals, int* result) {
  const int tid = threadIdx.x;
  int mine = 0;
  for (int i = begin; i < end; ++i) mine += is_tie(i);
  if (tid == 0) *result = 0x7fffffff;
  const int before = block_inclusive_scan(mine, totals) - mine;  // (synchronises)
  if (n > before && n <= before + mine) {
    int rank = before;
    for (int i = begin; i < end; ++i) {
      if (is_tie(i) && ++rank == n) {
        *result = i;
        break;
      }
    }
  }
  __syncthreads();
  const int id = *result;
  __syncthreads();  // the next call may reuse result
  return id;
}

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(SamplingParams p) {
  __shared__ float scratch[32];
  __shared__ float s_val;
  __shared__ int s_idx;
  const int row = blockIdx.x;
  const float* logits = p.logits + row * p.ld;
  const SamplingRow opt = p.options[row];
  const int tid = threadIdx.x;

  // Max logit and its lowest id (greedy answer; also the softmax shift).
  float best = -INFINITY;
  int best_idx = 0x7fffffff;
  for (int i = tid; i < p.vocab; i += blockDim.x) {
    const float v = clean(logits[i]);
    if (v > best || (v == best && i < best_idx)) { best = v; best_idx = i; }
  }
  {
    const int lane = tid % kWarpSize, warp = tid / kWarpSize;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best, o);
      const int i = __shfl_xor_sync(0xffffffffu, best_idx, o);
      if (v > best || (v == best && i < best_idx)) { best = v; best_idx = i; }
    }
    __shared__ float w_val[32];
    __shared__ int w_idx[32];
    if (lane == 0) { w_val[warp] = best; w_idx[warp] = best_idx; }
    __syncthreads();
    if (warp == 0) {
      best = w_val[lane];
      best_idx = w_idx[lane];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best, o);
        const int i = __shfl_xor_sync(0xffffffffu, best_idx, o);
        if (v > best || (v == best && i < best_idx)) { best = v; best_idx = i; }
      }
      if (lane == 0) { s_val = best; s_idx = best_idx; }
    }
    __syncthreads();
  }
  const float mx = s_val;
  if (opt.temperature == 0.0f || opt.top_k == 1) {
    if (tid == 0) p.tokens[row] = s_idx;
    return;
  }

  // top_k: logit threshold key kk; ties at kk are kept in id order up to k.
  uint32_t kk = 0;
  int ties_allowed = 0x7fffffff;
  if (opt.top_k > 0 && opt.top_k < p.vocab) {
    kk = bisect_kth([&](uint32_t key) {
      int c = 0;
      for (int i = tid; i < p.vocab; i += blockDim.x) c += order_key(clean(logits[i])) >= key;
      return block_count(c, scratch);
    }, opt.top_k);
    int above = 0;
    for (int i = tid; i < p.vocab; i += blockDim.x) above += order_key(clean(logits[i])) > kk;
    ties_allowed = opt.top_k - block_count(above, scratch);
  }
  const float inv_t = 1.0f / opt.temperature;
  // Ties are ranked in id order over contiguous id segments (thread t owns ids [t seg, (t + 1)
  // seg), the same segments as the draw below). The kept ties at kk are the first ties_allowed:
  // cutting at the id of the last one makes "is id i a candidate" a pure function of its key
  // and id, so every pass below reads the logits coalesced (thread t: ids t, t + 1024, ...).
  const int seg = (p.vocab + blockDim.x - 1) / blockDim.x;
  const int begin = min(p.vocab, tid * seg), end = min(p.vocab, begin + seg);
  __shared__ int tie_totals[kWarpSize];
  __shared__ int s_tie;
  const int tie_last =
      ties_allowed == 0x7fffffff
          ? 0x7fffffff
          : nth_tie_id([&](int i) { return order_key(clean(logits[i])) == kk; }, ties_allowed,
                       begin, end, tie_totals, &s_tie);
  // prob(i) for candidates, 0 otherwise.
  auto prob = [&](int i) -> float {
    const float v = clean(logits[i]);
    const uint32_t key = order_key(v);
    if (key < kk || (key == kk && i > tie_last)) return 0.0f;
    return expf((v - mx) * inv_t);
  };

  // The p-threshold.
  uint32_t pk = 0;         // keep p with key > pk, and ties at pk up to id p_tie_last
  int p_tie_last = 0x7fffffff;
  if (opt.top_p < 1.0f) {
    // The largest probability P with mass(p >= P) >= top_p * total, by a radix select over the
    // probabilities' bits (non-negative floats order like their bits): three passes of 10-bit
    // digits, each a histogram of the mass of the candidates that share the digits chosen so far.
    // Mass is fixed point (exact, so the answer does not depend on the order the atomics land
    // in), kept as three 14-bit limbs in 32-bit bins: native shared atomics (a 64-bit shared
    // atomicAdd is a compare-and-swap loop), and a limb's sum over the vocabulary (<= 2^18
    // entries, kSamplingMaxVocab) stays below 2^32.
    __shared__ uint32_t hist[3][kRadixBins];
    __shared__ unsigned long long s_mass, scan_totals[kWarpSize];
    __shared__ uint32_t s_digit;
    unsigned long long total_fx = 0;
    for (int i = tid; i < p.vocab; i += blockDim.x) total_fx += fixed_mass(prob(i));
    total_fx = block_sum_u64(total_fx, &s_mass);
    const double want = ceil(double{opt.top_p} * static_cast<double>(total_fx));
    const unsigned long long target_fx =
        want < 1.0 ? 1ull : min(total_fx, static_cast<unsigned long long>(want));
    uint32_t prefix = 0;              // the digits chosen so far
    unsigned long long above = 0;     // mass of the candidates above the chosen prefix
    static_assert(kRadixBins == kSampleThreads, "one bin per thread in the digit search");
    for (int shift = 20; shift >= 0; shift -= kRadixBits) {
      for (int j = tid; j < kRadixBins; j += blockDim.x) hist[0][j] = hist[1][j] = hist[2][j] = 0;
      if (tid == 0) { s_digit = 0; s_mass = above; }
      __syncthreads();
      for (int i = tid; i < p.vocab; i += blockDim.x) {
        const float pi = prob(i);
        const uint32_t b = __float_as_uint(pi);
        if (pi > 0.0f && (shift == 20 || (b >> (shift + kRadixBits)) == prefix)) {
          const uint32_t digit = (b >> shift) & (kRadixBins - 1);
          const unsigned long long v = fixed_mass(pi);  // <= 2^40
          atomicAdd(&hist[0][digit], static_cast<uint32_t>(v & kLimbMask));
          atomicAdd(&hist[1][digit], static_cast<uint32_t>((v >> kLimbBits) & kLimbMask));
          atomicAdd(&hist[2][digit], static_cast<uint32_t>(v >> (2 * kLimbBits)));
        }
      }
      __syncthreads();
      // The highest digit d whose mass, with all digits above it, reaches the target: thread j
      // holds digit 1023 - j, so an inclusive scan gives each digit the mass of it and all above.
      const int d = kRadixBins - 1 - tid;
      const unsigned long long mass = hist[0][d] +
                                      (static_cast<unsigned long long>(hist[1][d]) << kLimbBits) +
                                      (static_cast<unsigned long long>(hist[2][d]) << (2 * kLimbBits));
      const unsigned long long with = block_inclusive_scan(mass, scan_totals);
      // Exactly one thread sees the crossing (digit 0 takes whatever is left).
      if (above + with >= target_fx && above + with - mass < target_fx) {
        s_digit = static_cast<uint32_t>(d);
        s_mass = above + with - mass;
      } else if (d == 0 && above + with < target_fx) {
        s_digit = 0;
        s_mass = above + with - mass;
      }
      __syncthreads();
      prefix = (prefix << kRadixBits) | s_digit;
      above = s_mass;
      __syncthreads();  // s_digit / s_mass / hist are rewritten by the next pass
    }
    const float q = __uint_as_float(prefix);  // the threshold probability itself
    pk = order_key(q);
    // The CPU sampler adds candidates in descending probability, ties in id order, until the
    // mass reaches the target: of the ties at q it keeps the first n with
    // mass(> q) + n q >= target.
    const unsigned long long q_fx = fixed_mass(q);
    const unsigned long long n_fx = q_fx == 0 ? 0 : (target_fx - above + q_fx - 1) / q_fx;
    if (q_fx != 0 && n_fx < 0x7fffffffull) {
      p_tie_last = nth_tie_id([&](int i) { return order_key(prob(i)) == pk; },
                              max(1, static_cast<int>(n_fx)), begin, end, tie_totals, &s_tie);
    }
  }
  // min_p relative to p_max = 1 (the best logit is always a candidate): exp(0) = 1.
  const float cut = opt.min_p > 0.0f ? opt.min_p : 0.0f;
  auto kept = [&](int i) -> float {
    const float pi = prob(i);
    const uint32_t key = order_key(pi);
    return (pi > 0.0f && key >= pk && (key > pk || i <= p_tie_last) && pi >= cut) ? pi : 0.0f;
  };

  // Draw: prefix sums of the kept mass over contiguous id segments.
  __shared__ float seg_mass[kSampleThreads];
  float mine = 0.0f;
  for (int i = begin; i < end; ++i) mine += kept(i);
  seg_mass[tid] = mine;
  __syncthreads();
  if (tid == 0) {
    float run = 0.0f;
    for (int t = 0; t < blockDim.x; ++t) { const float m = seg_mass[t]; seg_mass[t] = run; run += m; }
    s_val = run;  // total kept mass
    const double u = hymoe::sampling_uniform(opt.seed, opt.step);  // the CPU sampler's draw
    float target = static_cast<float>(u * run);
    if (target >= run) target = nextafterf(run, 0.0f);  // u < 1, but the float product may round up
    scratch[0] = target;
    s_idx = -1;
  }
  __syncthreads();
  const float target = scratch[0];
  const float lo_mass = seg_mass[tid];
  if (mine > 0.0f && target >= lo_mass && target < lo_mass + mine) {
    float cum = lo_mass;
    int chosen = -1, last = -1;
    for (int i = begin; i < end; ++i) {
      const float pi = kept(i);
      if (pi <= 0.0f) continue;
      last = i;
      cum += pi;
      if (target < cum) { chosen = i; break; }
    }
    s_idx = chosen >= 0 ? chosen : last;
  }
  __syncthreads();
  // The segments' intervals [lo_mass, lo_mass + mine) tile [0, run) with the same float sums
  // thread 0 formed, so exactly one thread chose (at worst its last kept token, when the running
  // sum inside the segment rounds below the target).
  if (tid == 0) p.tokens[row] = s_idx;
}

}  // namespace hymoe::gpu::kernels
