// A generated tiny checkpoint on disk with everything the executor tests need around it: the
// store, the bound weights, the reference forward pass and a 2-thread pool. The checkpoint's
// folder goes away with it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/cpu/topology.h"
#include "hymoe/model/model_weights.h"
#include "hymoe/model/model_writer.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"
#include "reference_model.h"

namespace hymoe::test {

// DeepSeek-V3's attention head shapes on the tiny model (the prefill kernel's: nope 128, rope 64,
// v 128, lora 512) with 16 heads: a TinyModel `shape` for the GPU prefill paths' tests.
inline void deepseek_prefill_attention(ModelConfig& c) {
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 16;
}

struct TinyModel {
  // vocab: smaller than the preset's to keep the float64 reference quick (the lm_head path is
  // the same).
  // `shape` (optional) changes the tiny config before the checkpoint is written, e.g. to
  // DeepSeek-V3's attention dimensions.
  TinyModel(const std::string& name, uint64_t seed, int64_t vocab, void (*shape)(ModelConfig&) = nullptr) {
    dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
    ModelConfig c = preset_config("tiny");
    c.vocab_size = vocab;
    if (shape) shape(c);
    ModelWriteOptions wo;
    wo.seed = seed;
    write_random_checkpoint(c, dir, wo);
    store = WeightStore::open(dir);
    weights = std::make_unique<ModelWeights>(ModelWeights::bind(*store));
    reference = std::make_unique<reference::ReferenceModel>(*weights);
    cpu::ThreadPoolOptions po;
    po.threads = 2;
    po.pin = false;
    pool = std::make_unique<cpu::ThreadPool>(cpu::Topology::detect(), po);
  }
  ~TinyModel() {
    pool.reset();
    reference.reset();
    weights.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
  TinyModel(const TinyModel&) = delete;
  TinyModel& operator=(const TinyModel&) = delete;

  std::filesystem::path dir;
  std::unique_ptr<WeightStore> store;
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<reference::ReferenceModel> reference;
  std::unique_ptr<cpu::ThreadPool> pool;
};

}  // namespace hymoe::test
