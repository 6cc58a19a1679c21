// The layer sequence every executor runs: the stage order per layer kind, and the interleaved
// form for micro-batches (each lane sees exactly run_layers' order; lanes' GPU parts of a layer
// are all issued before the first lane's CPU experts).
#include "hymoe/engine/layer_sequence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hymoe/model/model_weights.h"

namespace hymoe {
namespace {

struct Recorder final : LayerOps {
  std::string lane;
  std::vector<std::string>* global = nullptr;  // every lane's calls in order
  std::vector<std::string> own;
  void add(const char* what, int64_t layer) {
    const std::string s = std::string(what) + std::to_string(layer);
    own.push_back(s);
    if (global) global->push_back(lane + ":" + s);
  }
  void attention(int64_t l) override { add("attn", l); }
  void ffn_input(int64_t l) override { add("in", l); }
  void dense_mlp(int64_t l) override { add("dense", l); }
  void router(int64_t l) override { add("router", l); }
  void shared_expert(int64_t l) override { add("shared", l); }
  void routed_experts(int64_t l) override { add("routed", l); }
  void ffn_residual(int64_t l) override { add("res", l); }
};

ModelWeights two_layers() {
  ModelWeights w;
  w.layers.resize(2);
  w.layers[0].dense = MlpWeights{};
  w.layers[1].moe = MoeWeights{};
  return w;
}

TEST(LayerSequence, StagesInOrderPerLayerKind) {
  const ModelWeights w = two_layers();
  Recorder r;
  LayerTimes times;
  run_layers(w, r, &times);
  const std::vector<std::string> want = {"attn0", "in0", "dense0", "res0", "attn1", "in1",
                                         "router1", "shared1", "routed1", "res1"};
  EXPECT_EQ(r.own, want);
  EXPECT_GE(times.attention_s, 0.0);
}

TEST(LayerSequence, InterleavedLanesEachRunTheSameSequence) {
  const ModelWeights w = two_layers();
  Recorder single;
  run_layers(w, single);
  std::vector<std::string> global;
  Recorder a, b;
  a.lane = "A";
  b.lane = "B";
  a.global = b.global = &global;
  LayerOps* lanes[] = {&a, &b};
  run_layers_interleaved(w, lanes);
  EXPECT_EQ(a.own, single.own);
  EXPECT_EQ(b.own, single.own);
  // In the MoE layer both lanes' GPU stages come before lane A's routed experts, and lane A's
  // residual before lane B's routed experts.
  auto at = [&](const std::string& s) { return std::find(global.begin(), global.end(), s) - global.begin(); };
  EXPECT_LT(at("B:shared1"), at("A:routed1"));
  EXPECT_LT(at("A:res1"), at("B:routed1"));
}

}  // namespace
}  // namespace hymoe
