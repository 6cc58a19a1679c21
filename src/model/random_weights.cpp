#include "hymoe/model/random_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hymoe/common/cpu_features.h"
#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "parallel.h"
#include "random_kernels.h"

namespace hymoe {
namespace {

uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hash_name(std::string_view s) {  // FNV-1a
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

// The loops live in random_kernels.h, built for AVX2 and for baseline x86-64.
const RandomKernels& kernels() {
  static const RandomKernels& k = random_kernels(cpu_features().avx2);
  return k;
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
  float* inv = buf.data() + rows * cols;  // per column block: max |w| bits, then 1 / scale
  std::vector<uint32_t> amax(static_cast<size_t>(scale_cols), 0);
  const float std_dev = 1.0f / std::sqrt(static_cast<float>(cols));
  const RandomKernels& k = kernels();
  k.normal_fill(buf.data(), rows * cols, seed, 0, 0.0f, std_dev);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = buf.data() + r * cols;
    for (int64_t cb = 0; cb < scale_cols; ++cb) {
      const int64_t c0 = cb * 128;
      amax[cb] = k.abs_max_bits(row + c0, std::min<int64_t>(128, cols - c0), amax[cb]);
    }
  }
  auto* scales = reinterpret_cast<float*>(s.data.data()) + (item.row_begin / 128) * scale_cols;
  for (int64_t cb = 0; cb < scale_cols; ++cb) {
    const float m = std::bit_cast<float>(amax[cb]);
    const float scale = m > 0.0f ? m / kFp8E4M3Max : 1.0f;
    scales[cb] = scale;
    inv[cb] = 1.0f / scale;
  }
  auto* out = reinterpret_cast<uint8_t*>(w.data.data()) + item.row_begin * cols;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t cb = 0; cb < scale_cols; ++cb) {
      const int64_t c0 = cb * 128;
      k.encode_scaled(buf.data() + r * cols + c0, std::min<int64_t>(128, cols - c0), inv[cb],
                    out + r * cols + c0);
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
    kernels().normal_fill(reinterpret_cast<float*>(t.data.data()) + begin, n, seed, 0, mean, std_dev);
  } else {
    HYMOE_CHECK(spec.dtype == DType::kBF16, kInternal, "tensor '{}': unexpected dtype", spec.name);
    thread_local std::vector<float> tmp;
    tmp.resize(static_cast<size_t>(n));
    kernels().normal_fill(tmp.data(), n, seed, 0, mean, std_dev);
    kernels().to_bf16(tmp.data(), n, reinterpret_cast<uint16_t*>(t.data.data()) + begin);
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
