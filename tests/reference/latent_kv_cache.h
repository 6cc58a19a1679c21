// The MLA latent KV cache of one sequence, in float: per layer and token the normalised c_kv
// (kv_lora_rank values) and the roped k_pe (qk_rope_head_dim values, interleaved pairs).
// The engines' paged BF16 cache holds the same quantities; this one is plain and contiguous.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hymoe::reference {

class LatentKvCache {
 public:
  LatentKvCache(int64_t layers, int64_t kv_lora_rank, int64_t rope_dim)
      : kv_lora_rank_(kv_lora_rank), rope_dim_(rope_dim), layers_(static_cast<size_t>(layers)) {}

  LatentKvCache(const LatentKvCache&) = default;  // a plain value: copying forks a sequence
  LatentKvCache& operator=(const LatentKvCache&) = default;
  LatentKvCache(LatentKvCache&&) noexcept = default;
  LatentKvCache& operator=(LatentKvCache&&) noexcept = default;

  int64_t layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t kv_lora_rank() const { return kv_lora_rank_; }
  int64_t rope_dim() const { return rope_dim_; }
  // Tokens held by `layer`. After a complete forward every layer holds the same number.
  int64_t tokens(int64_t layer) const {
    return static_cast<int64_t>(layers_[static_cast<size_t>(layer)].c_kv.size()) / kv_lora_rank_;
  }
  // Tokens of the sequence (those of the last layer: a forward appends to it last).
  int64_t size() const { return layers_.empty() ? 0 : tokens(layers() - 1); }

  void append(int64_t layer, std::span<const float> c_kv, std::span<const float> k_pe) {
    Layer& l = layers_[static_cast<size_t>(layer)];
    l.c_kv.insert(l.c_kv.end(), c_kv.begin(), c_kv.end());
    l.k_pe.insert(l.k_pe.end(), k_pe.begin(), k_pe.end());
  }
  std::span<const float> c_kv(int64_t layer, int64_t token) const {
    return {layers_[static_cast<size_t>(layer)].c_kv.data() + token * kv_lora_rank_,
            static_cast<size_t>(kv_lora_rank_)};
  }
  std::span<const float> k_pe(int64_t layer, int64_t token) const {
    return {layers_[static_cast<size_t>(layer)].k_pe.data() + token * rope_dim_,
            static_cast<size_t>(rope_dim_)};
  }

 private:
  struct Layer {
    std::vector<float> c_kv;  // [tokens, kv_lora_rank]
    std::vector<float> k_pe;  // [tokens, rope_dim]
  };
  int64_t kv_lora_rank_;
  int64_t rope_dim_;
  std::vector<Layer> layers_;
};

}  // namespace hymoe::reference
