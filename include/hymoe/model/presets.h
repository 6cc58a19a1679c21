// Model presets: the configs hymoe-make-model and `--load-format dummy` build models from.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hymoe/model/config.h"

namespace hymoe {

// The preset names: "tiny", "deepseek-v3", "kimi-k2".
std::vector<std::string> preset_names();

// The config of a preset, validated.
//  - "tiny": small dims that still span >= 2 scale blocks per FP8 dim (kv_a has 288 rows, a
//    ragged last block), 3 layers: layer 0 dense, 1-2 MoE (16 experts, 4 per token, 4 groups).
//  - "deepseek-v3", "kimi-k2": the real dimensions of the released checkpoints.
// layers > 0 overrides num_hidden_layers (a proxy model); a proxy keeps at most layers-1 dense
// layers so that it holds at least one MoE layer. Generated checkpoints carry no MTP module, so
// num_nextn_predict_layers is 0 in every preset.
// Throws hymoe::Error (kInvalidArgument) for an unknown name or layers == 0 / < -1.
ModelConfig preset_config(std::string_view name, int layers = -1);

}  // namespace hymoe
