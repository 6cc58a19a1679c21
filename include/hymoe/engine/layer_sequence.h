// The model's layer sequence, written once: every executor runs the same stages in the same order
// and supplies the stage operations for its placement (CPU kernels; GPU kernels with the routed
// experts on the CPU; routed experts streamed to the GPU). The step's state (residual stream,
// activations, KV cache) lives in the executor; stages communicate through it.
#pragma once

#include <cstdint>
#include <span>

namespace hymoe {

struct ModelWeights;

class LayerOps {
 public:
  virtual ~LayerOps() = default;
  // Input norm, MLA attention over the latent KV cache (this step's rows written to it first),
  // o_proj, added to the residual stream.
  virtual void attention(int64_t layer) = 0;
  // The post-attention norm: the FFN's input.
  virtual void ffn_input(int64_t layer) = 0;
  // A dense layer's SiLU-gated MLP: the FFN output.
  virtual void dense_mlp(int64_t layer) = 0;
  // MoE: router scores and top-k; the shared expert (the FFN output; zero without one); the
  // routed experts, weighted and added to the FFN output.
  virtual void router(int64_t layer) = 0;
  virtual void shared_expert(int64_t layer) = 0;
  virtual void routed_experts(int64_t layer) = 0;
  // The FFN output added to the residual stream.
  virtual void ffn_residual(int64_t layer) = 0;
};

// Wall time per stage class, summed over calls (for --profile and benchmarks).
struct LayerTimes {
  double attention_s = 0;  // attention()
  double dense_s = 0;      // ffn_input .. ffn_residual of dense layers
  double moe_s = 0;        // ffn_input .. ffn_residual of MoE layers
};

// Runs every layer of `weights` through `ops`, in order; adds the stage times to `times` when given.
void run_layers(const ModelWeights& weights, LayerOps& ops, LayerTimes* times = nullptr);

// The same sequence for several micro-batches ("lanes", each its own LayerOps over its own rows)
// interleaved so that asynchronous stages overlap: per layer, every lane's stages up to the
// shared expert are issued first, then each lane's routed experts and FFN residual in turn. With
// GPU stages that only enqueue work on a lane's stream and routed experts that run on the CPU,
// lane B's GPU part of a layer runs while the CPU computes lane A's experts, and lane A's next
// layer while the CPU computes lane B's (dual micro-batch overlap). Each lane computes exactly
// what run_layers would for its rows.
void run_layers_interleaved(const ModelWeights& weights, std::span<LayerOps* const> lanes);

}  // namespace hymoe
