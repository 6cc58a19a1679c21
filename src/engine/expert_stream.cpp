#include "hymoe/engine/expert_stream.h"

#include <cuda_runtime_api.h>

#include <chrono>

#include "hymoe/common/error.h"
#include "hymoe/common/stopwatch.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/gemm.h"

namespace hymoe {
namespace {

using Clock = SteadyClock;
size_t aligned(size_t b) { return (b + 255) / 256 * 256; }

// An expert's bytes as copied: its three FP8 matrices and their FP32 scales.
size_t expert_bytes(const ModelWeights& weights, const ExpertStreamer::Item& item) {
  const MlpWeights& e = weights.layers[static_cast<size_t>(item.layer)].moe->experts[static_cast<size_t>(item.expert)];
  return e.gate.bytes() + e.up.bytes() + e.down.bytes() +
         static_cast<size_t>(e.gate.scale_rows() * e.gate.scale_cols() + e.up.scale_rows() * e.up.scale_cols() +
                             e.down.scale_rows() * e.down.scale_cols()) *
             sizeof(float);
}

}  // namespace

ExpertSlotLayout ExpertSlotLayout::of(const ModelConfig& c) {
  ExpertSlotLayout l;
  l.hidden = c.hidden_size;
  l.inter = c.moe_intermediate_size;
  l.gate_scale_ld = gpu::block_scale_ld(static_cast<int>(l.hidden));
  l.down_scale_ld = gpu::block_scale_ld(static_cast<int>(l.inter));
  const size_t w = static_cast<size_t>(l.hidden * l.inter);
  const size_t gs = static_cast<size_t>((l.inter + 127) / 128 * l.gate_scale_ld) * sizeof(float);
  const size_t ds = static_cast<size_t>((l.hidden + 127) / 128 * l.down_scale_ld) * sizeof(float);
  size_t at = 0;
  l.gate_w = at;
  at += aligned(w);
  l.up_w = at;
  at += aligned(w);
  l.down_w = at;
  at += aligned(w);
  l.gate_s = at;
  at += aligned(gs);
  l.up_s = at;
  at += aligned(gs);
  l.down_s = at;
  at += aligned(ds);
  l.bytes = at;
  return l;
}

ExpertRing::ExpertRing(const ModelConfig& config, int slots, gpu::MemoryBudget* budget)
    : layout_(ExpertSlotLayout::of(config)), slots_(slots) {
  HYMOE_CHECK(slots >= 1, kInvalidArgument, "expert ring: {} slots", slots);
  HYMOE_CHECK(layout_.hidden % 16 == 0 && layout_.inter % 16 == 0, kUnsupported,
              "expert ring: hidden {} and moe_intermediate_size {} must be multiples of 16", layout_.hidden,
              layout_.inter);
  memory_ = gpu::DeviceBuffer(static_cast<size_t>(slots) * layout_.bytes, budget);
  // The scales' padding columns are never copied into: zero once.
  HYMOE_CUDA_CHECK(cudaMemset(memory_.data(), 0, memory_.bytes()));
}

gpu::ExpertWeight ExpertRing::view(int slot, size_t w, size_t s) const {
  const std::byte* base = slot_data(slot);
  return {reinterpret_cast<const gpu::Fp8E4M3*>(base + w), reinterpret_cast<const float*>(base + s)};
}

void ExpertRing::load(int slot, const MlpWeights& e, cudaStream_t stream) {
  HYMOE_CHECK(slot >= 0 && slot < slots_, kInvalidArgument, "expert ring: slot {} of {}", slot, slots_);
  const ExpertSlotLayout& l = layout_;
  HYMOE_CHECK(e.gate.rows == l.inter && e.gate.cols == l.hidden && e.up.rows == l.inter && e.up.cols == l.hidden &&
                  e.down.rows == l.hidden && e.down.cols == l.inter,
              kInvalidArgument, "expert ring: expert of shape gate {}x{} up {}x{} down {}x{}, the ring holds {}x{}",
              e.gate.rows, e.gate.cols, e.up.rows, e.up.cols, e.down.rows, e.down.cols, l.inter, l.hidden);
  auto* base = const_cast<std::byte*>(slot_data(slot));
  const struct {
    const Fp8Matrix* m;
    size_t w, s;
    int64_t ld;
  } parts[] = {{&e.gate, l.gate_w, l.gate_s, l.gate_scale_ld},
               {&e.up, l.up_w, l.up_s, l.gate_scale_ld},
               {&e.down, l.down_w, l.down_s, l.down_scale_ld}};
  for (const auto& p : parts) {
    HYMOE_CUDA_CHECK(cudaMemcpyAsync(base + p.w, p.m->data, p.m->bytes(), cudaMemcpyHostToDevice, stream));
    const size_t row = static_cast<size_t>(p.m->scale_cols()) * sizeof(float);
    HYMOE_CUDA_CHECK(cudaMemcpy2DAsync(base + p.s, static_cast<size_t>(p.ld) * sizeof(float), p.m->scale_inv, row, row,
                                       static_cast<size_t>(p.m->scale_rows()), cudaMemcpyHostToDevice, stream));
  }
}

ExpertStreamer::ExpertStreamer(ExpertRing& ring, const ModelWeights& weights, int device)
    : ring_(ring), weights_(weights), device_(device) {
  for (int s = 0; s < ring.slots(); ++s) {
    // Blocking: the unloader waits on these for most of a step; spinning would take a core from
    // the decode's CPU experts running beside.
    on_.emplace_back(false, true);
    off_.emplace_back(false, true);
    free_slots_.push_back(s);
  }
  loader_ = std::thread([this] { loader_main(); });
  unloader_ = std::thread([this] { unloader_main(); });
}

ExpertStreamer::~ExpertStreamer() {
  cancel();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  loader_.join();
  unloader_.join();
}

void ExpertStreamer::start(std::vector<Item> schedule) {
  for (const Item& it : schedule) {
    HYMOE_CHECK(it.layer >= 0 && it.layer < static_cast<int64_t>(weights_.layers.size()) &&
                    weights_.layers[static_cast<size_t>(it.layer)].moe.has_value() && it.expert >= 0 &&
                    it.expert < static_cast<int32_t>(weights_.layers[static_cast<size_t>(it.layer)].moe->experts.size()),
                kInvalidArgument, "expert streamer: layer {} expert {} is not a routed expert of the model", it.layer,
                it.expert);
  }
  std::unique_lock lock(mu_);
  HYMOE_CHECK(cancelled_ || freed_ == schedule_.size(), kInvalidArgument,
              "expert streamer: start() before the previous schedule finished ({} of {} items freed) or was cancelled",
              freed_, schedule_.size());
  // Nothing in flight, every released slot back.
  cv_.wait(lock, [&] { return in_flight_ == 0 && released_.empty(); });
  schedule_ = std::move(schedule);
  marks_.clear();
  if (marks_on_) {
    for (size_t i = 0; i < schedule_.size(); ++i) {
      if (marks_.empty() || marks_.back().layer != schedule_[i].layer) {
        marks_.emplace_back();
        marks_.back().layer = schedule_[i].layer;
        marks_.back().first = i;
      }
      marks_.back().last = i;
    }
  }
  slot_of_.assign(schedule_.size(), -1);
  loaded_.assign(schedule_.size(), 0);
  next_load_ = 0;
  freed_ = 0;
  cancelled_ = false;
  ++generation_;
  lock.unlock();
  cv_.notify_all();
}

void ExpertStreamer::loader_main() {
  (void)cudaSetDevice(device_);
  std::unique_lock lock(mu_);
  for (;;) {
    const auto t_wait = Clock::now();
    const bool had_work = !cancelled_ && next_load_ < schedule_.size();
    cv_.wait(lock, [&] {
      return stopping_ || (!cancelled_ && next_load_ < schedule_.size() && !free_slots_.empty());
    });
    if (stopping_) return;
    if (had_work) stats_.slot_wait_s += seconds_since(t_wait);
    if (pacer_) {
      // Paced (decodes run beside): wait out the bucket's delay before taking the slot; a cancel
      // or a stop cuts the wait short.
      const double delay = pacer_->delay_for(expert_bytes(weights_, schedule_[next_load_]));
      if (delay > 0) {
        const size_t gen = generation_;
        const auto t_pace = Clock::now();
        cv_.wait_for(lock, std::chrono::duration<double>(delay),
                     [&] { return stopping_ || cancelled_ || gen != generation_; });
        const double waited = seconds_since(t_pace);
        stats_.paced_s += waited;
        pacer_->on_waited(waited);
        if (stopping_ || cancelled_ || gen != generation_) continue;
      }
    }
    const int slot = free_slots_.front();
    free_slots_.pop_front();
    const size_t i = next_load_++;
    const size_t gen = generation_;
    const Item item = schedule_[i];
    ++in_flight_;
    lock.unlock();
    const auto t0 = Clock::now();
    const MlpWeights& e = weights_.layers[static_cast<size_t>(item.layer)].moe->experts[static_cast<size_t>(item.expert)];
    bool ok = true;
    try {
      // marks_ is only resized by start(), which waits for no item in flight.
      Mark* mark = nullptr;
      for (Mark& m : marks_) mark = m.first <= i && i <= m.last ? &m : mark;
      if (mark && i == mark->first) mark->begin.record(copy_);
      ring_.load(slot, e, copy_);
      on_[static_cast<size_t>(slot)].record(copy_);
      if (mark && i == mark->last) mark->end.record(copy_);
    } catch (const Error&) {
      ok = false;  // a copy that cannot be issued: the item never loads, acquire() sees cancel
    }
    const double busy = seconds_since(t0);
    lock.lock();
    stats_.loader_busy_s += busy;
    if (ok && gen == generation_ && !cancelled_) {
      slot_of_[i] = slot;
      loaded_[i] = 1;
      stats_.bytes += expert_bytes(weights_, item);
      ++stats_.items;
    } else {
      if (!ok) cancelled_ = true;
      lock.unlock();
      if (ok) on_[static_cast<size_t>(slot)].synchronize();  // the copy is done before the slot is reused
      lock.lock();
      free_slots_.push_back(slot);
    }
    --in_flight_;
    cv_.notify_all();
  }
}

void ExpertStreamer::unloader_main() {
  (void)cudaSetDevice(device_);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !released_.empty(); });
    if (released_.empty()) return;  // stopping, nothing left to free
    const size_t i = released_.front();
    const int slot = slot_of_[i];
    lock.unlock();
    off_[static_cast<size_t>(slot)].synchronize();  // the compute that read the slot is done
    lock.lock();
    released_.pop_front();
    free_slots_.push_back(slot);
    ++freed_;
    cv_.notify_all();
  }
}

int ExpertStreamer::acquire(size_t i, cudaStream_t compute) {
  std::unique_lock lock(mu_);
  HYMOE_CHECK(i < schedule_.size(), kInvalidArgument, "expert streamer: item {} of {}", i, schedule_.size());
  const auto t0 = Clock::now();
  cv_.wait(lock, [&] { return cancelled_ || loaded_[i] != 0; });
  stats_.model_wait_s += seconds_since(t0);
  HYMOE_CHECK(!cancelled_, kUnavailable, "expert streamer: cancelled before item {} (layer {} expert {})", i,
              schedule_[i].layer, schedule_[i].expert);
  const int slot = slot_of_[i];
  loaded_[i] = 3;  // acquired: cancel() leaves the slot to release()
  lock.unlock();
  on_[static_cast<size_t>(slot)].wait_on(compute);
  return slot;
}

void ExpertStreamer::release(size_t i, cudaStream_t compute) {
  std::unique_lock lock(mu_);
  HYMOE_CHECK(i < schedule_.size() && loaded_[i] == 3, kInvalidArgument, "expert streamer: release of item {} not acquired",
              i);
  const int slot = slot_of_[i];
  off_[static_cast<size_t>(slot)].record(compute);
  loaded_[i] = 2;  // released
  released_.push_back(i);
  lock.unlock();
  cv_.notify_all();
}

void ExpertStreamer::cancel() {
  std::unique_lock lock(mu_);
  cancelled_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return in_flight_ == 0 && released_.empty(); });
  // Items loaded but never acquired hold slots whose copies may still run: wait, then free them.
  for (size_t i = 0; i < loaded_.size(); ++i) {
    if (loaded_[i] != 1) continue;
    const int slot = slot_of_[i];
    loaded_[i] = 0;
    lock.unlock();
    on_[static_cast<size_t>(slot)].synchronize();
    lock.lock();
    free_slots_.push_back(slot);
  }
  next_load_ = schedule_.size();
  cv_.notify_all();
}

void ExpertStreamer::finish() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return cancelled_ || freed_ == schedule_.size(); });
}

void ExpertStreamer::set_layer_marks(bool on) {
  std::lock_guard lock(mu_);
  marks_on_ = on;
}

std::vector<ExpertStreamer::LayerCopy> ExpertStreamer::layer_copies(const gpu::Event& ref) const {
  std::lock_guard lock(mu_);
  std::vector<LayerCopy> out;
  for (const Mark& m : marks_)
    out.push_back({m.layer, gpu::Event::elapsed_ms(ref, m.begin), gpu::Event::elapsed_ms(ref, m.end)});
  return out;
}

void ExpertStreamer::set_pacer(CopyPacer* pacer) {
  std::lock_guard lock(mu_);
  pacer_ = pacer;
}

ExpertStreamer::Stats ExpertStreamer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace hymoe
