#include "mla.h"

#include <algorithm>
#include <cmath>

#include "hymoe/common/error.h"
#include "linear.h"
#include "rmsnorm.h"

namespace hymoe::reference {
namespace {

double dot(std::span<const float> a, std::span<const float> b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Softmax in place over scores (double).
void softmax(std::vector<double>& s) {
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0.0;
  for (double& v : s) {
    v = std::exp(v - m);
    sum += v;
  }
  for (double& v : s) v /= sum;
}

}  // namespace

MlaLatent mla_latent(const AttentionWeights& w, const ModelConfig& config, const YarnRope& rope,
                     std::span<const float> x, int64_t pos) {
  const size_t lora = static_cast<size_t>(config.kv_lora_rank);
  const size_t rdim = static_cast<size_t>(config.qk_rope_head_dim);
  std::vector<float> ckv_kpe(lora + rdim);
  linear(w.kv_a_with_mqa, x, ckv_kpe);
  MlaLatent out;
  out.c_kv.resize(lora);
  rmsnorm(std::span<const float>(ckv_kpe).first(lora), w.kv_a_norm, config.rms_norm_eps, out.c_kv);
  out.k_pe.assign(ckv_kpe.begin() + static_cast<ptrdiff_t>(lora), ckv_kpe.end());
  rope.apply(out.k_pe, pos);
  return out;
}

std::vector<float> mla_query(const AttentionWeights& w, const ModelConfig& config,
                             const YarnRope& rope, std::span<const float> x, int64_t pos) {
  std::vector<float> qa(static_cast<size_t>(config.q_lora_rank));
  linear(w.q_a, x, qa);
  rmsnorm(qa, w.q_a_norm, config.rms_norm_eps, qa);
  const int64_t qk = config.qk_head_dim();
  std::vector<float> q(static_cast<size_t>(config.num_attention_heads * qk));
  linear(w.q_b, qa, q);
  for (int64_t h = 0; h < config.num_attention_heads; ++h) {
    rope.apply(std::span<float>(q).subspan(static_cast<size_t>(h * qk + config.qk_nope_head_dim),
                                           static_cast<size_t>(config.qk_rope_head_dim)),
               pos);
  }
  return q;
}

void mla_attend(const AttentionWeights& w, const ModelConfig& config, const YarnRope& rope,
                std::span<const float> q, const LatentKvCache& cache, int64_t layer, int64_t ctx,
                MlaForm form, std::span<float> out) {
  const int64_t heads = config.num_attention_heads;
  const int64_t nope = config.qk_nope_head_dim;
  const int64_t rdim = config.qk_rope_head_dim;
  const int64_t vdim = config.v_head_dim;
  const int64_t lora = config.kv_lora_rank;
  const int64_t qk = nope + rdim;
  const int64_t kv_rows = nope + vdim;  // kv_b rows per head
  HYMOE_CHECK(ctx > 0 && ctx <= cache.tokens(layer), kInvalidArgument,
              "attention over {} tokens, layer {} caches {}", ctx, layer, cache.tokens(layer));
  HYMOE_CHECK(static_cast<int64_t>(q.size()) == heads * qk && w.kv_b.rows == heads * kv_rows &&
                  w.kv_b.cols == lora,
              kInvalidArgument, "mla: q of {} values, kv_b [{}, {}] for {} heads", q.size(),
              w.kv_b.rows, w.kv_b.cols, heads);

  std::vector<float> o(static_cast<size_t>(heads * vdim));
  std::vector<double> scores(static_cast<size_t>(ctx));

  if (form == MlaForm::kNaive) {
    // k_nope and v of every head for every context token, from kv_b(c_kv).
    std::vector<float> kv(static_cast<size_t>(ctx * heads * kv_rows));
    for (int64_t t = 0; t < ctx; ++t) {
      linear(w.kv_b, cache.c_kv(layer, t),
             std::span<float>(kv).subspan(static_cast<size_t>(t * heads * kv_rows),
                                          static_cast<size_t>(heads * kv_rows)));
    }
    for (int64_t h = 0; h < heads; ++h) {
      std::span<const float> q_nope = q.subspan(static_cast<size_t>(h * qk), static_cast<size_t>(nope));
      std::span<const float> q_pe = q.subspan(static_cast<size_t>(h * qk + nope), static_cast<size_t>(rdim));
      for (int64_t t = 0; t < ctx; ++t) {
        std::span<const float> k_nope(kv.data() + (t * heads + h) * kv_rows, static_cast<size_t>(nope));
        scores[t] = (dot(q_nope, k_nope) + dot(q_pe, cache.k_pe(layer, t))) * rope.softmax_scale();
      }
      softmax(scores);
      for (int64_t e = 0; e < vdim; ++e) {
        double acc = 0.0;
        for (int64_t t = 0; t < ctx; ++t) acc += scores[t] * kv[(t * heads + h) * kv_rows + nope + e];
        o[h * vdim + e] = static_cast<float>(acc);
      }
    }
  } else {
    std::vector<double> q_lat(static_cast<size_t>(lora));
    std::vector<double> o_lat(static_cast<size_t>(lora));
    for (int64_t h = 0; h < heads; ++h) {
      // q_lat = W_UK[h]^T q_nope[h]
      std::fill(q_lat.begin(), q_lat.end(), 0.0);
      for (int64_t d = 0; d < nope; ++d) {
        const double qd = q[h * qk + d];
        for (int64_t c = 0; c < lora; ++c) q_lat[c] += fp8_at(w.kv_b, h * kv_rows + d, c) * qd;
      }
      std::span<const float> q_pe = q.subspan(static_cast<size_t>(h * qk + nope), static_cast<size_t>(rdim));
      for (int64_t t = 0; t < ctx; ++t) {
        std::span<const float> ckv = cache.c_kv(layer, t);
        double s = 0.0;
        for (int64_t c = 0; c < lora; ++c) s += q_lat[c] * ckv[c];
        scores[t] = (s + dot(q_pe, cache.k_pe(layer, t))) * rope.softmax_scale();
      }
      softmax(scores);
      std::fill(o_lat.begin(), o_lat.end(), 0.0);
      for (int64_t t = 0; t < ctx; ++t) {
        std::span<const float> ckv = cache.c_kv(layer, t);
        for (int64_t c = 0; c < lora; ++c) o_lat[c] += scores[t] * ckv[c];
      }
      // o[h] = W_UV[h] o_lat
      for (int64_t e = 0; e < vdim; ++e) {
        double acc = 0.0;
        for (int64_t c = 0; c < lora; ++c) acc += fp8_at(w.kv_b, h * kv_rows + nope + e, c) * o_lat[c];
        o[h * vdim + e] = static_cast<float>(acc);
      }
    }
  }
  linear(w.o, o, out);
}

}  // namespace hymoe::reference
