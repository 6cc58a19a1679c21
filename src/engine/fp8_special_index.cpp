// Fp8SpecialIndex::attach: every FP8 matrix of the model scanned once, in parallel.
#include "hymoe/engine/fp8_special_index.h"

#include <atomic>

namespace hymoe {
namespace {

void add(std::vector<Fp8Matrix*>& out, Fp8Matrix& m) {
  if (m.data && m.rows > 0 && m.cols > 0) out.push_back(&m);
}
void add(std::vector<Fp8Matrix*>& out, MlpWeights& w) {
  add(out, w.gate);
  add(out, w.up);
  add(out, w.down);
}

}  // namespace

Fp8SpecialIndex Fp8SpecialIndex::attach(ModelWeights& weights, cpu::ThreadPool& pool) {
  std::vector<Fp8Matrix*> all;
  for (LayerWeights& l : weights.layers) {
    for (Fp8Matrix* m : {&l.attn.q_a, &l.attn.q_b, &l.attn.kv_a_with_mqa, &l.attn.kv_b, &l.attn.o}) add(all, *m);
    if (l.dense) add(all, *l.dense);
    if (l.moe) {
      if (l.moe->shared) add(all, *l.moe->shared);
      for (MlpWeights& e : l.moe->experts) add(all, e);
    }
  }
  std::vector<std::unique_ptr<Fp8SpecialCodes>> found(all.size());
  std::atomic<size_t> next{0};
  pool.run([&](const cpu::WorkerInfo&) {
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < all.size();
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      found[i] = std::make_unique<Fp8SpecialCodes>(kernels::find_fp8_special_codes(*all[i]));
    }
  });
  Fp8SpecialIndex index;
  index.matrices_ = all.size();
  for (size_t i = 0; i < all.size(); ++i) {
    const size_t n = static_cast<size_t>(all[i]->rows * all[i]->cols);
    index.scanned_ += n;
    if (static_cast<double>(found[i]->count()) > kMaxFraction * static_cast<double>(n)) continue;
    index.special_codes_ += found[i]->count();
    all[i]->specials = found[i].get();
    index.codes_.push_back(std::move(found[i]));
  }
  return index;
}

size_t Fp8SpecialIndex::bytes() const {
  size_t b = 0;
  for (const auto& c : codes_)
    b += c->row_start.size() * sizeof(uint32_t) + c->col.size() * sizeof(uint32_t) + c->code.size();
  return b;
}

}  // namespace hymoe
