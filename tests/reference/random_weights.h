// Test support: a complete ModelWeights over random buffers held in memory, without any
// checkpoint code. FP8 matrices are quantised from Gaussian values with a per-128x128-block
// scale (each block with its own spread, so the e4m3 range and distinct scales are exercised);
// norms, embeddings, lm_head and router in BF16, router bias in F32.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "hymoe/model/config.h"
#include "hymoe/model/model_weights.h"

namespace hymoe::reference::testing {

// The tiny preset's dimensions (hidden 256, 3 layers: 1 dense + 2 MoE, 16 experts, ...) with a
// small vocabulary so tests stay fast.
ModelConfig tiny_test_config(int64_t vocab = 512);

class RandomWeights {
 public:
  RandomWeights(const ModelConfig& config, uint64_t seed);
  RandomWeights(const RandomWeights&) = delete;
  RandomWeights& operator=(const RandomWeights&) = delete;

  const ModelWeights& weights() const { return weights_; }
  const ModelConfig& config() const { return *config_; }

  // A standalone random FP8 matrix / dense vector owned by this object (for piece tests).
  Fp8Matrix fp8(int64_t rows, int64_t cols, double stddev);
  DenseMatrix bf16(int64_t rows, int64_t cols, double mean, double stddev);
  DenseMatrix f32(int64_t rows, int64_t cols, double mean, double stddev);

 private:
  MlpWeights mlp(int64_t hidden, int64_t inter);

  std::unique_ptr<ModelConfig> config_;
  std::mt19937_64 rng_;
  // Owned storage; deques keep element addresses stable as they grow.
  std::deque<std::vector<uint8_t>> bytes_;
  std::deque<std::vector<float>> floats_;
  std::deque<std::vector<uint16_t>> halves_;
  ModelWeights weights_;
};

}  // namespace hymoe::reference::testing
