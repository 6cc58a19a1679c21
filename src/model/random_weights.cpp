#include "hymoe/model/random_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "parallel.h"

namespace hymoe {
namespace {

uint64_t hash_name(std::string_view s) {  // FNV-1a
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

// Counter-based: element i of a stream is a pure function of (seed, i), so loops over it carry no
// dependency from one element to the next.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Approximately standard normal from one 64-bit draw: the sum of its four 16-bit uniforms,
// centred and scaled to unit variance (Irwin-Hall; plenty for random weights).
inline float normal_from_bits(uint64_t r) {
  const uint32_t s = static_cast<uint32_t>(r & 0xFFFF) + static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                     static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
  // mean 4 * 32767.5, variance 4 * (65536^2 - 1) / 12
  constexpr float kMean = 131070.0f;
  constexpr float kInvStd = 1.0f / 37837.23f;
  return (static_cast<float>(s) - kMean) * kInvStd;
}

// n values of mean + std_dev * N(0, 1), element i from (seed, first + i).
void normal_fill(float* out, int64_t n, uint64_t seed, int64_t first, float mean, float std_dev) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  uint64_t z = seed + static_cast<uint64_t>(first) * kGolden;
  for (int64_t i = 0; i < n; ++i) {
    z += kGolden;
    // wyrand's output step: one 64x64->128 multiply, folded.
    __extension__ using u128 = unsigned __int128;
    const u128 m = static_cast<u128>(z) * (z ^ 0xE7037ED1A0B428DBull);
    out[i] = mean + std_dev * normal_from_bits(static_cast<uint64_t>(m >> 64) ^ static_cast<uint64_t>(m));
  }
}

// Branch-free float -> E4M3FN (round to nearest even, saturating).
inline uint8_t encode_e4m3_branchless(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  u &= 0x7FFFFFFFu;
  const uint32_t r = u + 0x7FFFFu + ((u >> 20) & 1u);  // round the mantissa to 3 bits
  const uint32_t normal = (((r >> 23) - 120u) << 3) | ((r >> 20) & 7u);
  // Below 2^-6: steps of 2^-9; adding 2^23 rounds a*512 to an integer (ties to even).
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(u) * 512.0f + 8388608.0f) -
                       0x4B000000u;
  uint32_t code = u < 0x3C800000u ? sub : normal;
  code = u >= 0x43E00000u ? 0x7Eu : code;
  return static_cast<uint8_t>(sign | code);
}

// One unit of work: rows [row_begin, row_end) of a target (FP8 weights: one 128-row block).
struct WorkItem {
  size_t target;
  size_t scale_target;  // FP8 only
  int64_t row_begin;
  int64_t row_end;
};

constexpr int64_t kDenseChunkElems = 1 << 20;

void fill_fp8_rows(const FillTarget& w, const FillTarget& s, const WorkItem& item, uint64_t seed,
                   std::vector<float>& buf) {
  const int64_t cols = w.tensor->spec.shape[1];
  const int64_t scale_cols = (cols + 127) / 128;
  const int64_t rows = item.row_end - item.row_begin;
  buf.resize(static_cast<size_t>(rows * cols + scale_cols));
  float* amax = buf.data() + rows * cols;
  std::fill(amax, amax + scale_cols, 0.0f);
  const float std_dev = 1.0f / std::sqrt(static_cast<float>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = buf.data() + r * cols;
    normal_fill(row, cols, seed, r * cols, 0.0f, std_dev);
    for (int64_t cb = 0; cb < scale_cols; ++cb) {
      float m = amax[cb];
      for (int64_t c = cb * 128; c < std::min(cols, cb * 128 + 128); ++c) m = std::max(m, std::fabs(row[c]));
      amax[cb] = m;
    }
  }
  auto* scales = reinterpret_cast<float*>(s.data.data()) + (item.row_begin / 128) * scale_cols;
  for (int64_t cb = 0; cb < scale_cols; ++cb) {
    const float scale = amax[cb] > 0.0f ? amax[cb] / kFp8E4M3Max : 1.0f;
    scales[cb] = scale;
    amax[cb] = 1.0f / scale;  // reused as the inverse scale
  }
  auto* out = reinterpret_cast<uint8_t*>(w.data.data()) + item.row_begin * cols;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = buf.data() + r * cols;
    uint8_t* dst = out + r * cols;
    for (int64_t cb = 0; cb < scale_cols; ++cb) {
      const float inv = amax[cb];
      for (int64_t c = cb * 128; c < std::min(cols, cb * 128 + 128); ++c) {
        dst[c] = encode_e4m3_branchless(row[c] * inv);
      }
    }
  }
}

void fill_dense_rows(const FillTarget& t, const WorkItem& item, uint64_t seed) {
  const TensorSpec& spec = t.tensor->spec;
  const int64_t cols = spec.shape.size() == 2 ? spec.shape[1] : spec.numel();
  const int64_t hidden = spec.shape.back();
  float mean = 0.0f, std_dev = 1.0f;
  switch (t.tensor->role) {
    case TensorRole::kEmbedding: break;
    case TensorRole::kLmHead:
    case TensorRole::kRouter: std_dev = 1.0f / std::sqrt(static_cast<float>(hidden)); break;
    case TensorRole::kNorm: mean = 1.0f; std_dev = 0.05f; break;
    case TensorRole::kRouterBias: std_dev = 0.02f; break;
    default: HYMOE_THROW(kInternal, "tensor '{}': not a dense role", spec.name);
  }
  const int64_t begin = item.row_begin * cols, n = (item.row_end - item.row_begin) * cols;
  if (spec.dtype == DType::kF32) {
    normal_fill(reinterpret_cast<float*>(t.data.data()) + begin, n, seed, 0, mean, std_dev);
  } else {
    HYMOE_CHECK(spec.dtype == DType::kBF16, kInternal, "tensor '{}': unexpected dtype", spec.name);
    thread_local std::vector<float> tmp;
    tmp.resize(static_cast<size_t>(n));
    normal_fill(tmp.data(), n, seed, 0, mean, std_dev);
    auto* out = reinterpret_cast<uint16_t*>(t.data.data()) + begin;
    for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(tmp[i]);
  }
}

}  // namespace

uint8_t encode_e4m3_fast(float x) { return encode_e4m3_branchless(x); }

void fill_random_weights(std::span<const FillTarget> targets, uint64_t seed, int threads) {
  std::unordered_map<std::string_view, size_t> by_name;
  for (size_t i = 0; i < targets.size(); ++i) {
    const FillTarget& t = targets[i];
    HYMOE_CHECK(t.tensor && t.data.size() == t.tensor->spec.nbytes(), kInvalidArgument,
                "fill_random_weights: target {} has the wrong size", i);
    by_name.emplace(t.tensor->spec.name, i);
  }
  std::vector<WorkItem> items;
  for (size_t i = 0; i < targets.size(); ++i) {
    const LayoutTensor& t = *targets[i].tensor;
    if (t.role == TensorRole::kFp8Scale) continue;
    const int64_t rows = t.spec.shape.size() == 2 ? t.spec.shape[0] : 1;
    const int64_t cols = t.spec.shape.size() == 2 ? t.spec.shape[1] : t.spec.numel();
    if (t.role == TensorRole::kFp8Weight) {
      auto it = by_name.find(t.spec.name + "_scale_inv");
      HYMOE_CHECK(it != by_name.end(), kInvalidArgument,
                  "fill_random_weights: weight '{}' without its scale tensor", t.spec.name);
      for (int64_t r = 0; r < rows; r += 128) {
        items.push_back({i, it->second, r, std::min(rows, r + 128)});
      }
    } else {
      const int64_t step = std::max<int64_t>(1, kDenseChunkElems / std::max<int64_t>(cols, 1));
      for (int64_t r = 0; r < rows; r += step) items.push_back({i, i, r, std::min(rows, r + step)});
    }
  }
  parallel_for(items.size(), threads, [&](size_t k) {
    thread_local std::vector<float> buf;
    const WorkItem& item = items[k];
    const FillTarget& t = targets[item.target];
    const uint64_t item_seed =
        mix64(seed ^ hash_name(t.tensor->spec.name)) ^ mix64(static_cast<uint64_t>(item.row_begin) + 1);
    if (t.tensor->role == TensorRole::kFp8Weight) {
      fill_fp8_rows(t, targets[item.scale_target], item, item_seed, buf);
    } else {
      fill_dense_rows(t, item, item_seed);
    }
  });
}

}  // namespace hymoe
