// Where a GPU model's bytes went (GpuModel), for the start-up log, /v1/models and /metrics. No
// CUDA headers: the executors' public headers include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hymoe {

struct GpuPlacement {
  std::string device_name;
  size_t budget_bytes = 0;       // the memory budget on the device
  size_t resident_bytes = 0;     // weights on the device (everything but the routed experts)
  size_t kv_bytes = 0;           // the latent KV pool
  size_t step_bytes = 0;         // the executors' activations and step buffers
  size_t cpu_expert_bytes = 0;   // routed experts left in host memory (computed by the CPU)
  size_t gpu_expert_bytes = 0;   // routed experts on the device
  int64_t kv_tokens = 0;
  int64_t gpu_expert_layers = 0; // MoE layers whose routed experts the GPU holds
  std::string describe() const;  // one line for the log
};

}  // namespace hymoe
