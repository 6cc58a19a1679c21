// The tensors of a DeepseekV3ForCausalLM checkpoint for a config: HF names, dtypes and shapes,
// grouped the way hymoe-make-model shards them. hymoe-make-model writes this list to files and
// WeightStore::dummy fills it in memory, from the same random generator (random_weights.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hymoe/model/config.h"
#include "hymoe/model/tensor.h"

namespace hymoe {

enum class TensorRole {
  kFp8Weight,   // F8_E4M3 linear weight [out, in]; its scale is the next tensor of the group
  kFp8Scale,    // F32 weight_scale_inv [ceil(out/128), ceil(in/128)]
  kEmbedding,   // BF16 [vocab, hidden]
  kLmHead,      // BF16 [vocab, hidden]
  kNorm,        // BF16 RMSNorm weight [n]
  kRouter,      // BF16 mlp.gate.weight [experts, hidden]
  kRouterBias,  // F32 e_score_correction_bias [experts]
};

struct LayoutTensor {
  TensorSpec spec;
  TensorRole role = TensorRole::kNorm;
  int64_t layer = -1;   // decoder layer, -1 outside the layers
  int64_t expert = -1;  // routed expert index, -1 for everything else
};

// One shard's worth of tensors: "embed", "layer.<i>" for each layer, "head" (norm + lm_head).
struct LayoutGroup {
  std::string name;
  std::vector<LayoutTensor> tensors;
};

// Every tensor of the checkpoint (MTP layers excluded). The config must be FP8-quantised.
std::vector<LayoutGroup> checkpoint_layout(const ModelConfig& config);

// "model.layers.7.mlp.experts.12.up_proj.weight" -> {7, 12}; {-1, -1} for non-expert names.
struct ExpertId {
  int64_t layer = -1;
  int64_t expert = -1;
};
ExpertId parse_expert_name(std::string_view name);

}  // namespace hymoe
