// Stream-loading of routed experts (SLP, issue 42): a ring of device slots, each one expert's
// gate, up and down in FP8 with their scales in the grouped GEMM's padded layout
// (GroupedFp8Gemm: [ceil(n/128), block_scale_ld(k)]), filled from host memory on a copy stream
// by a loader thread and recycled by an unloader thread once the compute stream is done with
// them: the three threads and streams of the design's SLP, with each CUDA event paired with a
// host-side flag so that host and device agree on the order.
//
//   loader     for each item of the schedule in order: wait for a free slot (and, with a pacer,
//              the pacer's delay: decodes beside), copy the expert into it on the copy stream,
//              record the slot's ON event, mark the item loaded.
//   model      acquire(i): wait until item i is loaded, make the compute stream wait for ON; run
//              the GEMMs; release(i): record the slot's OFF event on the compute stream.
//   unloader   for each released item in order: wait for OFF on the host, free the slot.
//
// The copy stream overlaps the model's compute of the items before; the ring's length bounds how
// far ahead the loader runs (a whole layer's experts, or two slots in ping-pong). Built only with
// CUDA (HYMOE_HAVE_CUDA).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "hymoe/engine/copy_pacer.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/moe.h"
#include "hymoe/gpu/stream.h"
#include "hymoe/model/model_weights.h"

namespace hymoe {

// Byte offsets of one expert inside a slot (each part 256-byte aligned).
struct ExpertSlotLayout {
  int64_t hidden = 0, inter = 0;
  int64_t gate_scale_ld = 0;  // block_scale_ld(hidden): gate and up scales' row length
  int64_t down_scale_ld = 0;  // block_scale_ld(inter)
  size_t gate_w = 0, up_w = 0, down_w = 0, gate_s = 0, up_s = 0, down_s = 0;
  size_t bytes = 0;           // a slot's size
  static ExpertSlotLayout of(const ModelConfig& config);
};

// The device slots. Not thread-safe; the streamer drives it.
class ExpertRing {
 public:
  ExpertRing(const ModelConfig& config, int slots, gpu::MemoryBudget* budget);
  int slots() const { return slots_; }
  const ExpertSlotLayout& layout() const { return layout_; }
  // The slot's matrices as the grouped GEMM and moe_gemv read them.
  gpu::ExpertWeight gate(int slot) const { return view(slot, layout_.gate_w, layout_.gate_s); }
  gpu::ExpertWeight up(int slot) const { return view(slot, layout_.up_w, layout_.up_s); }
  gpu::ExpertWeight down(int slot) const { return view(slot, layout_.down_w, layout_.down_s); }
  const std::byte* slot_data(int slot) const { return memory_.as<std::byte>() + static_cast<size_t>(slot) * layout_.bytes; }
  // Enqueues the copies of `expert` (host memory; pinned for DMA speed) into `slot` on `stream`:
  // each weight in one copy, each scale matrix row by row into the padded layout (one 2D copy).
  void load(int slot, const MlpWeights& expert, cudaStream_t stream);

 private:
  gpu::ExpertWeight view(int slot, size_t w, size_t s) const;
  ExpertSlotLayout layout_;
  int slots_ = 0;
  gpu::DeviceBuffer memory_;
};

class ExpertStreamer {
 public:
  struct Item {
    int64_t layer = 0;   // a MoE layer of the model
    int32_t expert = 0;  // a routed expert of it
  };
  struct Stats {
    size_t bytes = 0;          // copied to the device
    double loader_busy_s = 0;  // host time the loader spent issuing copies (not waiting for slots)
    double slot_wait_s = 0;    // the loader waiting for a free slot (compute is behind)
    double model_wait_s = 0;   // acquire() waiting for a copy to be issued (loading is behind)
    double paced_s = 0;        // the loader holding copies back for the pacer (decodes beside)
    int64_t items = 0;
  };

  // The ring's slots, the host weights (weights.layers[layer].moe->experts), the device whose
  // streams these are. Starts the loader and unloader threads, idle until start().
  ExpertStreamer(ExpertRing& ring, const ModelWeights& weights, int device);
  ~ExpertStreamer();  // cancels and joins
  ExpertStreamer(const ExpertStreamer&) = delete;
  ExpertStreamer& operator=(const ExpertStreamer&) = delete;

  // Streams `schedule` in order. Throws hymoe::Error (kInvalidArgument) for an item that is not a
  // routed expert of the model, or while the previous schedule has neither finished (every item
  // released and freed) nor been cancelled.
  void start(std::vector<Item> schedule);
  // Model side, items in schedule order: waits until item i is loaded and makes `compute` wait for
  // its copy; returns its slot. Throws hymoe::Error (kUnavailable) after cancel().
  int acquire(size_t i, cudaStream_t compute);
  // Model side: `compute`'s work so far is the last to read item i's slot.
  void release(size_t i, cudaStream_t compute);
  // Stops loading; returns when no copy is in flight and every released slot is free again.
  // Items acquired and not released keep their slots until released.
  void cancel();
  // Blocks until every item of the schedule was released and its slot freed.
  void finish();
  Stats stats() const;
  // Paces the loader's copies (nullptr: none, the default): before each copy it waits the delay
  // the pacer asks for. The pacer must outlive the streamer or be reset first.
  void set_pacer(CopyPacer* pacer);

  // Benchmarks: with marks on, each layer's copies are bracketed by timing events on the copy
  // stream (before its first item's copy, after its last); after finish(), the milliseconds of
  // each (layer, begin, end) since `ref`, an event recorded on the same device.
  struct LayerCopy {
    int64_t layer = 0;
    float begin_ms = 0, end_ms = 0;
  };
  void set_layer_marks(bool on);
  std::vector<LayerCopy> layer_copies(const gpu::Event& ref) const;

 private:
  void loader_main();
  void unloader_main();

  ExpertRing& ring_;
  const ModelWeights& weights_;
  int device_;
  gpu::Stream copy_;
  std::vector<gpu::Event> on_, off_;  // per slot
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> schedule_;
  std::vector<int> slot_of_;           // per item: its slot, -1 before loading
  std::vector<uint8_t> loaded_;        // per item: 0 not yet, 1 loaded (ON recorded), 3 acquired, 2 released
  size_t next_load_ = 0;               // the loader's next item
  std::deque<int> free_slots_;
  std::deque<size_t> released_;        // items released, OFF recorded, slot not yet free
  size_t freed_ = 0;                   // items whose slots came back
  size_t generation_ = 0;              // start() count: a cancelled schedule's items are stale
  bool cancelled_ = false, stopping_ = false;
  size_t in_flight_ = 0;               // loader items between taking a slot and marking loaded
  Stats stats_;
  CopyPacer* pacer_ = nullptr;
  bool marks_on_ = false;
  struct Mark {
    int64_t layer = 0;
    size_t first = 0, last = 0;  // the layer's items
    gpu::Event begin{true}, end{true};
  };
  std::vector<Mark> marks_;  // per layer of the schedule, with marks on
  std::thread loader_, unloader_;
};

}  // namespace hymoe
