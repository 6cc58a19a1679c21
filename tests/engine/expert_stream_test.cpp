// The SLP expert ring and its loader / unloader threads on a generated tiny checkpoint: slot
// contents byte for byte against the host experts (scales in the padded layout, padding zero),
// a whole schedule streamed through fewer slots than items with every slot poisoned after its
// use (a slot reused before its new copy landed shows the poison), cancellation midway, and the
// host registration of the store's memory. Skipped without a CUDA device.
#include "hymoe/engine/expert_stream.h"

#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/host_register.h"
#include "hymoe/gpu/stream.h"
#include "tiny_model_fixture.h"

namespace hymoe {
namespace {

class ExpertStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (gpu::device_count() == 0) return;
    model_ = new test::TinyModel("hymoe_expert_stream", 4242, 2048);
  }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override {
    if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static const ModelConfig& config() { return model_->store->config(); }
  static const MlpWeights& expert(const ExpertStreamer::Item& it) {
    return model_->weights->layers[static_cast<size_t>(it.layer)].moe->experts[static_cast<size_t>(it.expert)];
  }
  // Every routed expert of every MoE layer, layer by layer.
  static std::vector<ExpertStreamer::Item> all_items() {
    std::vector<ExpertStreamer::Item> items;
    for (size_t l = 0; l < model_->weights->layers.size(); ++l)
      if (model_->weights->layers[l].moe)
        for (int32_t e = 0; e < static_cast<int32_t>(config().n_routed_experts); ++e)
          items.push_back({static_cast<int64_t>(l), e});
    return items;
  }
  // A slot's bytes (copied to the host) against the expert: weights equal, scales row by row in
  // the padded layout, the padding zero when `padding` (a fresh ring's; loads never write it and
  // the GEMM never reads it). Returns the first difference or "".
  static std::string compare(const std::byte* slot, const ExpertSlotLayout& l, const MlpWeights& e, bool padding = true) {
    const struct {
      const Fp8Matrix* m;
      size_t w, s;
      int64_t ld;
      const char* name;
    } parts[] = {{&e.gate, l.gate_w, l.gate_s, l.gate_scale_ld, "gate"},
                 {&e.up, l.up_w, l.up_s, l.gate_scale_ld, "up"},
                 {&e.down, l.down_w, l.down_s, l.down_scale_ld, "down"}};
    for (const auto& p : parts) {
      if (std::memcmp(slot + p.w, p.m->data, p.m->bytes()) != 0) return std::string(p.name) + " weights";
      const auto* s = reinterpret_cast<const float*>(slot + p.s);
      for (int64_t r = 0; r < p.m->scale_rows(); ++r)
        for (int64_t c = 0; c < (padding ? p.ld : p.m->scale_cols()); ++c) {
          const float want = c < p.m->scale_cols() ? p.m->scale_inv[r * p.m->scale_cols() + c] : 0.0f;
          if (std::memcmp(&s[r * p.ld + c], &want, sizeof(float)) != 0)
            return std::string(p.name) + " scale row " + std::to_string(r) + " column " + std::to_string(c);
        }
    }
    return "";
  }
  static inline test::TinyModel* model_ = nullptr;
};

TEST_F(ExpertStreamTest, RingLoadCopiesTheExpertIntoThePaddedLayout) {
  ExpertRing ring(config(), 2, nullptr);
  const ExpertSlotLayout& l = ring.layout();
  EXPECT_EQ(l.gate_scale_ld % 4, 0);
  EXPECT_GE(l.bytes, 3 * static_cast<size_t>(l.hidden * l.inter));
  gpu::Stream s;
  const ExpertStreamer::Item it{1, 3};  // the tiny model's first MoE layer
  ring.load(1, expert(it), s);
  std::vector<std::byte> host(l.bytes);
  HYMOE_CUDA_CHECK(cudaMemcpyAsync(host.data(), ring.slot_data(1), l.bytes, cudaMemcpyDeviceToHost, s));
  s.synchronize();
  EXPECT_EQ(compare(host.data(), l, expert(it)), "");
  EXPECT_EQ(ring.gate(1).w, reinterpret_cast<const gpu::Fp8E4M3*>(ring.slot_data(1) + l.gate_w));
  EXPECT_THROW(ring.load(2, expert(it), s), Error);
}

TEST_F(ExpertStreamTest, ScheduleStreamsThroughFewerSlotsThanItems) {
  // The store's memory pinned, as SLP does; 3 slots for every expert of every MoE layer. The
  // model side copies each acquired slot out, then poisons it before releasing it.
  std::vector<gpu::HostSpan> spans;
  for (const MemoryRegion& r : model_->store->regions()) spans.push_back({r.data, r.bytes});
  gpu::HostRegistration pinned(spans);
  EXPECT_EQ(pinned.bytes(), model_->store->total_bytes());
  ExpertRing ring(config(), 3, nullptr);
  const ExpertSlotLayout& l = ring.layout();
  const auto items = all_items();
  ASSERT_GT(items.size(), 3u);
  EXPECT_TRUE(pinned.covers(expert(items[0]).gate.data, expert(items[0]).gate.bytes()));
  gpu::PinnedBuffer out(items.size() * l.bytes);
  gpu::Stream compute;
  ExpertStreamer streamer(ring, *model_->weights, 0);
  for (int round = 0; round < 2; ++round) {  // twice: the second schedule reuses the threads and slots
    streamer.start(items);
    for (size_t i = 0; i < items.size(); ++i) {
      const int slot = streamer.acquire(i, compute);
      HYMOE_CUDA_CHECK(cudaMemcpyAsync(out.as<std::byte>().data() + i * l.bytes, ring.slot_data(slot), l.bytes,
                                       cudaMemcpyDeviceToHost, compute));
      HYMOE_CUDA_CHECK(cudaMemsetAsync(const_cast<std::byte*>(ring.slot_data(slot)), 0xFF, l.bytes, compute));
      streamer.release(i, compute);
    }
    streamer.finish();
    compute.synchronize();
    for (size_t i = 0; i < items.size(); ++i)
      ASSERT_EQ(compare(out.as<std::byte>().data() + i * l.bytes, l, expert(items[i]), /*padding=*/false), "")
          << "round " << round << " item " << i << " (layer " << items[i].layer << " expert " << items[i].expert << ")";
  }
  const auto st = streamer.stats();
  EXPECT_EQ(st.items, static_cast<int64_t>(2 * items.size()));
  size_t per_round = 0;
  for (const auto& it : items) {
    const MlpWeights& e = expert(it);
    for (const Fp8Matrix* m : {&e.gate, &e.up, &e.down})
      per_round += m->bytes() + static_cast<size_t>(m->scale_rows() * m->scale_cols()) * sizeof(float);
  }
  EXPECT_EQ(st.bytes, 2 * per_round);
}

TEST_F(ExpertStreamTest, CancelMidwayFreesTheSlots) {
  ExpertRing ring(config(), 2, nullptr);
  gpu::Stream compute;
  ExpertStreamer streamer(ring, *model_->weights, 0);
  const auto items = all_items();
  streamer.start(items);
  EXPECT_THROW(streamer.start(items), Error);  // the first schedule is neither finished nor cancelled
  for (size_t i = 0; i < 5; ++i) {
    streamer.acquire(i, compute);
    streamer.release(i, compute);
  }
  streamer.cancel();
  EXPECT_THROW(streamer.acquire(5, compute), Error);
  // Both slots came back: a new schedule runs to its end.
  const std::vector<ExpertStreamer::Item> again(items.begin(), items.begin() + 4);
  streamer.start(again);
  for (size_t i = 0; i < again.size(); ++i) {
    streamer.acquire(i, compute);
    streamer.release(i, compute);
  }
  streamer.finish();
  EXPECT_THROW(streamer.start({{0, 0}}), Error);  // layer 0 is dense: no routed experts
}

TEST_F(ExpertStreamTest, HostRegistrationUnregistersOnDestruction) {
  std::vector<std::byte> host(1 << 20);
  const gpu::HostSpan span{host.data(), host.size()};
  {
    gpu::HostRegistration r({&span, 1});
    EXPECT_TRUE(r.covers(host.data() + 100, 1000));
    EXPECT_FALSE(r.covers(host.data() + host.size() - 10, 100));
    gpu::HostRegistration moved = std::move(r);
    EXPECT_EQ(moved.bytes(), host.size());
    EXPECT_EQ(r.bytes(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is defined
    // Registering the same memory twice fails, and names what it was pinning.
    EXPECT_THROW(gpu::HostRegistration({&span, 1}), Error);
  }
  gpu::HostRegistration again({&span, 1});  // unregistered by the destructor: registers anew
  EXPECT_EQ(again.bytes(), host.size());
}

}  // namespace
}  // namespace hymoe
