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

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hash_name(std::string_view s) {  // FNV-1a
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

// Approximately standard normal: the sum of four 16-bit uniforms, centred and scaled to unit
// variance (Irwin-Hall; plenty for random weights, one 64-bit draw per value).
struct NormalGen {
  uint64_t state;
  float next() {
    const uint64_t r = splitmix64(state);
    const uint32_t s = static_cast<uint32_t>(r & 0xFFFF) + static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                       static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
    // mean 4 * 32767.5, variance 4 * (65536^2 - 1) / 12
    constexpr float kMean = 131070.0f;
    constexpr float kInvStd = 1.0f / 37837.23f;
    return (static_cast<float>(s) - kMean) * kInvStd;
  }
};

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
  buf.resize(static_cast<size_t>(rows * cols));
  NormalGen g{seed};
  const float std_dev = 1.0f / std::sqrt(static_cast<float>(cols));
  for (float& v : buf) v = g.next() * std_dev;
  auto* out = reinterpret_cast<uint8_t*>(w.data.data()) + item.row_begin * cols;
  auto* scales = reinterpret_cast<float*>(s.data.data()) + (item.row_begin / 128) * scale_cols;
  for (int64_t cb = 0; cb < scale_cols; ++cb) {
    const int64_t c0 = cb * 128, c1 = std::min(cols, c0 + 128);
    float amax = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(buf[r * cols + c]));
    }
    const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
    const float inv = 1.0f / scale;
    scales[cb] = scale;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = c0; c < c1; ++c) out[r * cols + c] = encode_e4m3_fast(buf[r * cols + c] * inv);
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
  NormalGen g{seed};
  const int64_t begin = item.row_begin * cols, end = item.row_end * cols;
  if (spec.dtype == DType::kF32) {
    auto* out = reinterpret_cast<float*>(t.data.data());
    for (int64_t i = begin; i < end; ++i) out[i] = mean + std_dev * g.next();
  } else {
    HYMOE_CHECK(spec.dtype == DType::kBF16, kInternal, "tensor '{}': unexpected dtype", spec.name);
    auto* out = reinterpret_cast<uint16_t*>(t.data.data());
    for (int64_t i = begin; i < end; ++i) out[i] = float_to_bf16(mean + std_dev * g.next());
  }
}

}  // namespace

uint8_t encode_e4m3_fast(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  u &= 0x7FFFFFFFu;
  if (u >= 0x43E00000u) return sign | 0x7E;  // >= 448: saturate
  if (u < 0x3C800000u) {                      // < 2^-6: subnormal steps of 2^-9
    const float q = std::nearbyint(std::bit_cast<float>(u) * 512.0f);
    return sign | static_cast<uint8_t>(q);
  }
  u += 0x7FFFFu + ((u >> 20) & 1u);  // round the 23-bit mantissa to 3 bits, ties to even
  const uint32_t code = (((u >> 23) - 120u) << 3) | ((u >> 20) & 7u);
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, 0x7E));
}

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
    uint64_t h = seed ^ hash_name(t.tensor->spec.name);
    const uint64_t item_seed = splitmix64(h) ^ static_cast<uint64_t>(item.row_begin) * 0xD1B54A32D192ED03ull;
    if (t.tensor->role == TensorRole::kFp8Weight) {
      fill_fp8_rows(t, targets[item.scale_target], item, item_seed, buf);
    } else {
      fill_dense_rows(t, item, item_seed);
    }
  });
}

}  // namespace hymoe
