// MLA: naive and absorbed forms against a textbook attention written here with fully
// dequantised matrices and Hugging Face's rope layout (de-interleave, rotate_half).
#include <gtest/gtest.h>

#include <cmath>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "mla.h"
#include "random_weights.h"
#include "test_util.h"

namespace hymoe::reference {
namespace {

using testing::nan_vector;
using testing::random_vector;
using testing::rel_error;
using Mat = std::vector<std::vector<double>>;

Mat dequant(const Fp8Matrix& m) {
  Mat w(static_cast<size_t>(m.rows), std::vector<double>(static_cast<size_t>(m.cols)));
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) {
      w[i][j] = double{fp8_e4m3_to_float(m.data[i * m.cols + j])} *
                m.scale_inv[(i / 128) * ((m.cols + 127) / 128) + j / 128];
    }
  }
  return w;
}

std::vector<double> matvec(const Mat& w, const std::vector<double>& x) {
  std::vector<double> y(w.size(), 0.0);
  for (size_t i = 0; i < w.size(); ++i) {
    for (size_t j = 0; j < x.size(); ++j) y[i] += w[i][j] * x[j];
  }
  return y;
}

std::vector<double> norm(const std::vector<double>& x, const DenseMatrix& g, double eps) {
  double ms = 0.0;
  for (double v : x) ms += v * v / static_cast<double>(x.size());
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = double{bf16_to_float(static_cast<const uint16_t*>(g.data)[i])} * x[i] / std::sqrt(ms + eps);
  }
  return y;
}

// HF apply_rotary_pos_emb_interleave on one vector: de-interleave, then x*cos + rotate_half(x)*sin
// with cos/sin = cat(freqs, freqs) * attention_factor.
std::vector<double> hf_rope(const std::vector<double>& x, const YarnRope& rope, int64_t pos) {
  const size_t d = x.size(), half = d / 2;
  std::vector<double> p(d), out(d);
  for (size_t i = 0; i < half; ++i) {
    p[i] = x[2 * i];
    p[half + i] = x[2 * i + 1];
  }
  for (size_t i = 0; i < d; ++i) {
    const double f = static_cast<double>(pos) * rope.inv_freq(static_cast<int64_t>(i % half));
    const double rot = i < half ? -p[i + half] : p[i - half];
    out[i] = (p[i] * std::cos(f) + rot * std::sin(f)) * rope.attention_factor();
  }
  return out;
}

// Textbook causal MLA over tokens xs (already input-normed), outputs of every position.
std::vector<std::vector<double>> textbook_mla(const AttentionWeights& w, const ModelConfig& c,
                                              const YarnRope& rope,
                                              const std::vector<std::vector<float>>& xs) {
  const Mat q_a = dequant(w.q_a), q_b = dequant(w.q_b), kv_a = dequant(w.kv_a_with_mqa),
            kv_b = dequant(w.kv_b), o = dequant(w.o);
  const int64_t H = c.num_attention_heads, nope = c.qk_nope_head_dim, rd = c.qk_rope_head_dim,
                vd = c.v_head_dim, L = c.kv_lora_rank;
  const size_t T = xs.size();
  std::vector<Mat> q(T), k(T), v(T);  // [t][h][dim], q/k as [nope | rope(HF layout)]
  for (size_t t = 0; t < T; ++t) {
    const std::vector<double> x(xs[t].begin(), xs[t].end());
    const std::vector<double> qf = matvec(q_b, norm(matvec(q_a, x), w.q_a_norm, c.rms_norm_eps));
    const std::vector<double> a = matvec(kv_a, x);
    const std::vector<double> ckv = norm(std::vector<double>(a.begin(), a.begin() + L), w.kv_a_norm,
                                         c.rms_norm_eps);
    const std::vector<double> kpe =
        hf_rope(std::vector<double>(a.begin() + L, a.end()), rope, static_cast<int64_t>(t));
    const std::vector<double> kv = matvec(kv_b, ckv);
    for (int64_t h = 0; h < H; ++h) {
      const auto qh = qf.begin() + h * (nope + rd);
      std::vector<double> qq(qh, qh + nope);
      const std::vector<double> qpe =
          hf_rope(std::vector<double>(qh + nope, qh + nope + rd), rope, static_cast<int64_t>(t));
      qq.insert(qq.end(), qpe.begin(), qpe.end());
      q[t].push_back(qq);
      const auto kh = kv.begin() + h * (nope + vd);
      std::vector<double> kk(kh, kh + nope);
      kk.insert(kk.end(), kpe.begin(), kpe.end());
      k[t].push_back(kk);
      v[t].emplace_back(kh + nope, kh + nope + vd);
    }
  }
  std::vector<std::vector<double>> out;
  for (size_t t = 0; t < T; ++t) {
    std::vector<double> cat;
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> p(t + 1);
      double mx = -1e300, sum = 0.0;
      for (size_t s = 0; s <= t; ++s) {
        double dotp = 0.0;
        for (int64_t i = 0; i < nope + rd; ++i) dotp += q[t][h][i] * k[s][h][i];
        p[s] = dotp * rope.softmax_scale();
        mx = std::max(mx, p[s]);
      }
      for (double& e : p) sum += (e = std::exp(e - mx));
      for (int64_t i = 0; i < vd; ++i) {
        double acc = 0.0;
        for (size_t s = 0; s <= t; ++s) acc += p[s] / sum * v[s][h][i];
        cat.push_back(acc);
      }
    }
    out.push_back(matvec(o, cat));
  }
  return out;
}

TEST(ReferenceMla, BothFormsMatchTextbookAttention) {
  const ModelConfig cfg = testing::tiny_test_config();
  testing::RandomWeights store(cfg, 41);
  const AttentionWeights& w = store.weights().layers[0].attn;
  const YarnRope rope(cfg);
  std::mt19937_64 rng(42);
  std::vector<std::vector<float>> xs;
  for (int t = 0; t < 6; ++t) xs.push_back(random_vector(static_cast<size_t>(cfg.hidden_size), rng));
  const auto expect = textbook_mla(w, cfg, rope, xs);

  for (MlaForm form : {MlaForm::kNaive, MlaForm::kAbsorbed}) {
    LatentKvCache cache(1, cfg.kv_lora_rank, cfg.qk_rope_head_dim);
    for (size_t t = 0; t < xs.size(); ++t) {
      const MlaLatent lat = mla_latent(w, cfg, rope, xs[t], static_cast<int64_t>(t));
      cache.append(0, lat.c_kv, lat.k_pe);
      const std::vector<float> q = mla_query(w, cfg, rope, xs[t], static_cast<int64_t>(t));
      std::vector<float> out = nan_vector(static_cast<size_t>(cfg.hidden_size));
      mla_attend(w, cfg, rope, q, cache, 0, static_cast<int64_t>(t) + 1, form, out);
      EXPECT_LT(rel_error(out, expect[t]), 2e-6)
          << (form == MlaForm::kNaive ? "naive" : "absorbed") << " position " << t;
    }
  }
}

TEST(ReferenceMla, NaiveEqualsAbsorbedOverLongerContext) {
  ModelConfig cfg = testing::tiny_test_config();
  cfg.num_attention_heads = 3;  // a head count that is not a power of two
  testing::RandomWeights store(cfg, 43);
  const AttentionWeights& w = store.weights().layers[1].attn;
  const YarnRope rope(cfg);
  std::mt19937_64 rng(44);
  LatentKvCache cache(1, cfg.kv_lora_rank, cfg.qk_rope_head_dim);
  for (int64_t t = 0; t < 40; ++t) {
    const auto x = random_vector(static_cast<size_t>(cfg.hidden_size), rng);
    const MlaLatent lat = mla_latent(w, cfg, rope, x, 1000 + t);
    cache.append(0, lat.c_kv, lat.k_pe);
  }
  const auto x = random_vector(static_cast<size_t>(cfg.hidden_size), rng);
  const std::vector<float> q = mla_query(w, cfg, rope, x, 1039);
  std::vector<float> naive = nan_vector(256), absorbed = nan_vector(256);
  mla_attend(w, cfg, rope, q, cache, 0, 40, MlaForm::kNaive, naive);
  mla_attend(w, cfg, rope, q, cache, 0, 40, MlaForm::kAbsorbed, absorbed);
  EXPECT_LT(rel_error(absorbed, naive), 1e-6);
  EXPECT_THROW(mla_attend(w, cfg, rope, q, cache, 0, 41, MlaForm::kNaive, naive), Error);
  EXPECT_THROW(mla_attend(w, cfg, rope, q, cache, 0, 0, MlaForm::kAbsorbed, naive), Error);
}

}  // namespace
}  // namespace hymoe::reference
