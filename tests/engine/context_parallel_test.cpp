// DSLP's data movement (issue 44) on an in-process group of ranks (threads): the communicator's
// collectives, zig-zag stripes, striped causal attention against one rank's, SmallEP and standard
// expert parallelism against one process's MoE; a failed rank fails its peers' calls at once.
#include "hymoe/engine/context_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "hymoe/common/error.h"
#include "../rank_threads.h"
#include "../test_seed.h"

namespace hymoe {
namespace {

// A fresh seed, printed (HYMOE_TEST_SEED replays it: ../test_seed.h).
uint32_t fresh_seed() { return static_cast<uint32_t>(test::test_seed()); }

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

using test::on_ranks;

TEST(InProcessGroup, CollectivesMoveTheRightBytes) {
  std::mt19937 rng(fresh_seed());
  for (int ranks : {1, 2, 3, 4}) {
    InProcessGroup group(ranks);
    const size_t n = 37;
    std::vector<std::vector<float>> data(static_cast<size_t>(ranks));
    for (auto& d : data) d = random_floats(rng, n * static_cast<size_t>(ranks));
    on_ranks(ranks, [&](int r) {
      Communicator& c = group.rank(r);
      ASSERT_EQ(c.rank(), r);
      ASSERT_EQ(c.size(), ranks);
      const auto& mine = data[static_cast<size_t>(r)];
      // all_gather of each rank's first n values.
      std::vector<float> all(n * static_cast<size_t>(ranks), std::numeric_limits<float>::quiet_NaN());
      c.all_gather(mine.data(), all.data(), n * sizeof(float));
      for (int p = 0; p < ranks; ++p)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(all[static_cast<size_t>(p) * n + i], data[static_cast<size_t>(p)][i]);
      // reduce_scatter_sum: rank order sums.
      std::vector<float> slice(n, std::numeric_limits<float>::quiet_NaN());
      c.reduce_scatter_sum(mine.data(), slice.data(), n);
      for (size_t i = 0; i < n; ++i) {
        float want = data[0][static_cast<size_t>(r) * n + i];
        for (int p = 1; p < ranks; ++p) want += data[static_cast<size_t>(p)][static_cast<size_t>(r) * n + i];
        ASSERT_EQ(slice[i], want);
      }
      // A ring step with sizes that differ per rank: rank p sends p + 1 values.
      const int next = (r + 1) % ranks, prev = (r - 1 + ranks) % ranks;
      std::vector<float> got(static_cast<size_t>(prev) + 1, std::numeric_limits<float>::quiet_NaN());
      c.send_recv(mine.data(), (static_cast<size_t>(r) + 1) * sizeof(float), next, got.data(),
                  got.size() * sizeof(float), prev);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], data[static_cast<size_t>(prev)][i]);
      // all_to_all_v: rank p sends q + p values to rank q, from offset 3q.
      std::vector<size_t> sc, so, rc, ro;
      size_t at = 0;
      for (int q = 0; q < ranks; ++q) {
        sc.push_back((static_cast<size_t>(q + r)) * sizeof(float));
        so.push_back(static_cast<size_t>(3 * q) * sizeof(float));
        rc.push_back((static_cast<size_t>(r + q)) * sizeof(float));
        ro.push_back(at * sizeof(float));
        at += static_cast<size_t>(r + q);
      }
      std::vector<float> recv(at, std::numeric_limits<float>::quiet_NaN());
      c.all_to_all_v(mine.data(), sc, so, recv.data(), rc, ro);
      at = 0;
      for (int q = 0; q < ranks; ++q) {
        for (size_t i = 0; i < static_cast<size_t>(r + q); ++i)
          ASSERT_EQ(recv[at + i], data[static_cast<size_t>(q)][static_cast<size_t>(3 * r) + i]);
        at += static_cast<size_t>(r + q);
      }
    });
  }
}

TEST(InProcessGroup, MismatchedSizesFailEveryRank) {
  InProcessGroup group(2, 30.0);
  std::vector<ErrorKind> kinds(2);
  on_ranks(2, [&](int r) {
    float buf[4] = {1, 2, 3, 4}, got[4];
    try {
      // Rank 0 sends 3 floats, rank 1 expects 2 from it.
      group.rank(r).send_recv(buf, (r == 0 ? 3 : 2) * sizeof(float), 1 - r, got, 2 * sizeof(float), 1 - r);
      ADD_FAILURE() << "rank " << r << " returned";
    } catch (const Error& e) {
      kinds[static_cast<size_t>(r)] = e.kind();
    }
  });
  // The rank that found it says what is wrong; its peer learns that the group failed.
  EXPECT_TRUE(kinds[0] == ErrorKind::kInvalidArgument || kinds[1] == ErrorKind::kInvalidArgument);
  for (ErrorKind k : kinds) EXPECT_TRUE(k == ErrorKind::kInvalidArgument || k == ErrorKind::kUnavailable);
  // The group stays failed.
  float x = 0;
  EXPECT_THROW(group.rank(0).all_gather(&x, &x, 0), Error);
}

TEST(InProcessGroup, AbortWakesPeersAtOnceAndATimeoutFailsTheGroup) {
  {
    InProcessGroup group(3, 600.0);  // a hang would wait out 600 s: the abort must wake them
    std::vector<std::string> errors(3);
    on_ranks(3, [&](int r) {
      if (r == 2) {
        group.abort("rank 2's step failed: injected");
        return;
      }
      float x = 1, all[3];
      try {
        group.rank(r).all_gather(&x, all, sizeof(float));
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
    for (int r = 0; r < 2; ++r) EXPECT_NE(errors[static_cast<size_t>(r)].find("injected"), std::string::npos) << errors[static_cast<size_t>(r)];
  }
  {
    InProcessGroup group(2, 0.2);
    float x = 1, all[2];
    try {
      group.rank(0).all_gather(&x, all, sizeof(float));  // rank 1 never comes
      ADD_FAILURE() << "returned without its peer";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
      EXPECT_NE(std::string(e.what()).find("did not arrive"), std::string::npos) << e.what();
    }
  }
}

TEST(ZigzagStripes, EveryRowOnceEvenlyAndRowOfMapsThem) {
  for (int ranks : {1, 2, 3, 4}) {
    for (int64_t rows : {0, 1, 3, 7, 8, 64, 101, 257, 32768 + 5}) {
      const ZigzagStripes z{rows, ranks};
      std::vector<int> seen(static_cast<size_t>(rows), 0);
      int64_t lo = rows, hi = 0;
      for (int r = 0; r < ranks; ++r) {
        const auto s = z.of(r);
        EXPECT_EQ(s[0].begin <= s[1].begin, true);
        const int64_t n = z.local_rows(r);
        lo = std::min(lo, n);
        hi = std::max(hi, n);
        for (int64_t i = 0; i < n; ++i) ++seen[static_cast<size_t>(z.row_of(r, i))];
      }
      for (int v : seen) ASSERT_EQ(v, 1) << rows << " rows, " << ranks << " ranks";
      EXPECT_LE(hi - lo, 2);
      EXPECT_EQ(z.max_local_rows(), hi);
    }
  }
}

// Causal attention with positions: queries q [nq, H, D] at rows qpos against keys/values kv
// [nk, 2, H, D] at rows kpos (key row <= query row), scale 1/sqrt(D); out [nq, H, D], lse [nq, H].
void attend_partial(const float* q, const int64_t* qpos, int64_t nq, const float* kv, const int64_t* kpos, int64_t nk,
                    int64_t heads, int64_t dim, float* out, float* lse) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> s(static_cast<size_t>(nk));
  for (int64_t i = 0; i < nq; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < nk; ++j) {
        if (kpos[j] > qpos[i]) {
          s[static_cast<size_t>(j)] = -std::numeric_limits<float>::infinity();
          continue;
        }
        float dot = 0;
        for (int64_t d = 0; d < dim; ++d) dot += q[(i * heads + h) * dim + d] * kv[((j * 2 + 0) * heads + h) * dim + d];
        s[static_cast<size_t>(j)] = dot * scale;
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      float* o = out + (i * heads + h) * dim;
      std::fill_n(o, dim, 0.0f);
      if (m == -std::numeric_limits<float>::infinity()) {
        lse[i * heads + h] = m;
        continue;
      }
      float sum = 0;
      for (int64_t j = 0; j < nk; ++j) {
        if (kpos[j] > qpos[i]) continue;
        const float p = std::exp(s[static_cast<size_t>(j)] - m);
        sum += p;
        for (int64_t d = 0; d < dim; ++d) o[d] += p * kv[((j * 2 + 1) * heads + h) * dim + d];
      }
      for (int64_t d = 0; d < dim; ++d) o[d] /= sum;
      lse[i * heads + h] = m + std::log(sum);
    }
  }
}

// The kernel's semantics for a block: q rows against k rows, query i seeing keys j <= past + i.
void attend_window(const float* q, int64_t nq, const float* kv, int64_t nk, int64_t past, int64_t heads, int64_t dim,
                   float* out, float* lse) {
  std::vector<int64_t> qpos(static_cast<size_t>(nq)), kpos(static_cast<size_t>(nk));
  for (int64_t i = 0; i < nq; ++i) qpos[static_cast<size_t>(i)] = past + i;
  for (int64_t j = 0; j < nk; ++j) kpos[static_cast<size_t>(j)] = j;
  attend_partial(q, qpos.data(), nq, kv, kpos.data(), nk, heads, dim, out, lse);
}

TEST(StripedAttention, MatchesOneRanksCausalAttention) {
  std::mt19937 rng(fresh_seed());
  const int64_t heads = 3, dim = 8;
  const size_t kv_row = static_cast<size_t>(2 * heads * dim);
  for (int ranks : {1, 2, 3, 4}) {
    for (int64_t rows : {1, 5, 16, 101, 130}) {
      for (bool by_blocks : {false, true}) {
        const auto q = random_floats(rng, static_cast<size_t>(rows * heads * dim), 2.0f);
        const auto kv = random_floats(rng, static_cast<size_t>(rows) * kv_row);
        std::vector<int64_t> pos(static_cast<size_t>(rows));
        std::iota(pos.begin(), pos.end(), 0);
        std::vector<float> want(static_cast<size_t>(rows * heads * dim)), want_lse(static_cast<size_t>(rows * heads));
        attend_partial(q.data(), pos.data(), rows, kv.data(), pos.data(), rows, heads, dim, want.data(), want_lse.data());

        const ZigzagStripes z{rows, ranks};
        InProcessGroup group(ranks);
        std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
        on_ranks(ranks, [&](int r) {
          const int64_t n = z.local_rows(r);
          std::vector<int64_t> qpos(static_cast<size_t>(n));
          std::vector<float> my_q(static_cast<size_t>(n * heads * dim));
          std::vector<float> my_kv(static_cast<size_t>(n) * kv_row);
          for (int64_t i = 0; i < n; ++i) {
            qpos[static_cast<size_t>(i)] = z.row_of(r, i);
            std::copy_n(q.begin() + qpos[static_cast<size_t>(i)] * heads * dim, heads * dim, my_q.begin() + i * heads * dim);
            std::copy_n(kv.begin() + qpos[static_cast<size_t>(i)] * static_cast<int64_t>(kv_row), kv_row,
                        my_kv.begin() + i * static_cast<int64_t>(kv_row));
          }
          std::vector<float> out(my_q.size(), 0.0f), lse(static_cast<size_t>(n * heads), -std::numeric_limits<float>::infinity());
          std::vector<float> part(out.size()), part_lse(lse.size());
          const size_t ring_bytes = static_cast<size_t>(z.max_local_rows()) * kv_row * sizeof(float);
          std::vector<std::byte> ring0(ring_bytes), ring1(ring_bytes);
          std::vector<int> order;
          striped_attention_ring(
              group.rank(r), z, kv_row * sizeof(float), std::as_bytes(std::span<const float>(my_kv)),
              {std::span<std::byte>(ring0), std::span<std::byte>(ring1)},
              [&](std::span<const std::byte> block, int source) {
                order.push_back(source);
                const int64_t nk = z.local_rows(source);
                ASSERT_EQ(block.size(), static_cast<size_t>(nk) * kv_row * sizeof(float));
                std::vector<int64_t> kpos(static_cast<size_t>(nk));
                for (int64_t j = 0; j < nk; ++j) kpos[static_cast<size_t>(j)] = z.row_of(source, j);
                std::vector<float> keys(static_cast<size_t>(nk) * kv_row);
                std::memcpy(keys.data(), block.data(), block.size());
                if (by_blocks) {
                  // The windowed kernel's blocks (attention_blocks), each merged in: what a device
                  // attend runs.
                  for (const ZigzagStripes::Block& b : z.attention_blocks(r, source)) {
                    std::vector<float> bo(static_cast<size_t>(b.q_rows * heads * dim)), bl(static_cast<size_t>(b.q_rows * heads));
                    attend_window(my_q.data() + b.q_begin * heads * dim, b.q_rows,
                                  keys.data() + b.k_begin * static_cast<int64_t>(kv_row), b.k_rows, b.past, heads, dim,
                                  bo.data(), bl.data());
                    merge_attention_partials(out.data() + b.q_begin * heads * dim, lse.data() + b.q_begin * heads,
                                             bo.data(), bl.data(), b.q_rows, heads, dim);
                  }
                  return;
                }
                attend_partial(my_q.data(), qpos.data(), n, keys.data(), kpos.data(), nk, heads, dim, part.data(),
                               part_lse.data());
                merge_attention_partials(out.data(), lse.data(), part.data(), part_lse.data(), n, heads, dim);
              });
          ASSERT_EQ(static_cast<int>(order.size()), ranks);
          for (int s = 0; s < ranks; ++s) EXPECT_EQ(order[static_cast<size_t>(s)], (r - s + ranks) % ranks);
          for (int64_t i = 0; i < n; ++i)
            std::copy_n(out.begin() + i * heads * dim, heads * dim, got.begin() + qpos[static_cast<size_t>(i)] * heads * dim);
        });
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-5f) << "value " << i << " of " << rows << " rows on " << ranks << " ranks"
                                              << (by_blocks ? ", by blocks" : "");
      }
    }
  }
}

TEST(ZigzagStripes, AttentionBlocksCoverExactlyTheVisibleKeys) {
  for (int ranks : {1, 2, 3, 4}) {
    for (int64_t rows : {1, 7, 64, 101}) {
      const ZigzagStripes z{rows, ranks};
      for (int qr = 0; qr < ranks; ++qr) {
        // Visible (query row, key row) pairs by the blocks, against causality by prompt rows.
        std::vector<int> seen(static_cast<size_t>(rows * rows), 0);
        for (int kr = 0; kr < ranks; ++kr) {
          for (const ZigzagStripes::Block& b : z.attention_blocks(qr, kr)) {
            ASSERT_GE(b.past, 0);
            for (int64_t i = 0; i < b.q_rows; ++i)
              for (int64_t j = 0; j < b.k_rows && j <= b.past + i; ++j)
                ++seen[static_cast<size_t>(z.row_of(qr, b.q_begin + i) * rows + z.row_of(kr, b.k_begin + j))];
          }
        }
        for (int64_t l = 0; l < z.local_rows(qr); ++l) {
          const int64_t qrow = z.row_of(qr, l);
          for (int64_t k = 0; k < rows; ++k)
            ASSERT_EQ(seen[static_cast<size_t>(qrow * rows + k)], k <= qrow ? 1 : 0)
                << "query row " << qrow << ", key row " << k << ", " << rows << " rows on " << ranks << " ranks";
        }
      }
    }
  }
}

// A toy MoE layer: E experts (y = W2 silu(W1 x)), a softmax router with top-k, weights
// renormalised over the chosen experts.
struct ToyMoe {
  int64_t hidden = 16, inter = 8;
  int experts = 8, top_k = 2;
  std::vector<float> router, w1, w2;
  explicit ToyMoe(std::mt19937& rng)
      : router(random_floats(rng, static_cast<size_t>(experts * hidden))),
        w1(random_floats(rng, static_cast<size_t>(experts * inter * hidden), 0.5f)),
        w2(random_floats(rng, static_cast<size_t>(experts * hidden * inter), 0.5f)) {}

  MoeRouting route(std::span<const float> x, int64_t n) const {
    MoeRouting r;
    r.top_k = top_k;
    for (int64_t t = 0; t < n; ++t) {
      std::vector<std::pair<float, int>> s;
      for (int e = 0; e < experts; ++e) {
        float dot = 0;
        for (int64_t d = 0; d < hidden; ++d) dot += router[static_cast<size_t>(e * hidden + d)] * x[static_cast<size_t>(t * hidden + d)];
        s.push_back({dot, e});
      }
      std::partial_sort(s.begin(), s.begin() + top_k, s.end(), [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
      float sum = 0;
      for (int k = 0; k < top_k; ++k) sum += std::exp(s[static_cast<size_t>(k)].first - s[0].first);
      for (int k = 0; k < top_k; ++k) {
        r.experts.push_back(s[static_cast<size_t>(k)].second);
        r.weights.push_back(std::exp(s[static_cast<size_t>(k)].first - s[0].first) / sum);
      }
    }
    return r;
  }
  void expert_add(int e, const float* x, float weight, float* y) const {
    std::vector<float> a(static_cast<size_t>(inter));
    for (int64_t i = 0; i < inter; ++i) {
      float dot = 0;
      for (int64_t d = 0; d < hidden; ++d) dot += w1[static_cast<size_t>((e * inter + i) * hidden + d)] * x[d];
      a[static_cast<size_t>(i)] = dot / (1.0f + std::exp(-dot));
    }
    for (int64_t d = 0; d < hidden; ++d) {
      float dot = 0;
      for (int64_t i = 0; i < inter; ++i) dot += w2[static_cast<size_t>((e * hidden + d) * inter + i)] * a[static_cast<size_t>(i)];
      y[d] += weight * dot;
    }
  }
  SmallEpCallbacks callbacks(std::vector<int>* experts_seen) const {
    SmallEpCallbacks cb;
    cb.route = [this](std::span<const float> x, int64_t n) { return route(x, n); };
    cb.expert_rows = [this, experts_seen](int e, std::span<const int64_t> rows, std::span<const float> w,
                                          std::span<const float> x, std::span<float> y) {
      if (experts_seen) experts_seen->push_back(e);
      for (size_t i = 0; i < rows.size(); ++i)
        expert_add(e, x.data() + rows[i] * hidden, w[i], y.data() + rows[i] * hidden);
    };
    return cb;
  }
};

TEST(SmallEp, SmallEpAndExpertParallelMatchOneProcess) {
  std::mt19937 rng(fresh_seed());
  const ToyMoe moe(rng);
  const size_t h = static_cast<size_t>(moe.hidden);
  for (int ranks : {1, 2, 3, 4}) {
    for (int64_t rows : {1, 6, 37, 100}) {
      const auto x = random_floats(rng, static_cast<size_t>(rows) * h);
      std::vector<float> want(x.size(), 0.0f);
      const MoeRouting all = moe.route(x, rows);
      for (int64_t t = 0; t < rows; ++t)
        for (int k = 0; k < moe.top_k; ++k)
          moe.expert_add(all.experts[static_cast<size_t>(t * moe.top_k + k)], x.data() + t * moe.hidden,
                         all.weights[static_cast<size_t>(t * moe.top_k + k)], want.data() + t * moe.hidden);
      const ZigzagStripes z{rows, ranks};
      for (bool small : {true, false}) {
        InProcessGroup group(ranks);
        std::vector<float> got(x.size(), std::numeric_limits<float>::quiet_NaN());
        std::vector<size_t> sent(static_cast<size_t>(ranks)), sent_back(static_cast<size_t>(ranks));
        on_ranks(ranks, [&](int r) {
          const int64_t n = z.local_rows(r);
          std::vector<float> mine(static_cast<size_t>(n) * h);
          for (int64_t i = 0; i < n; ++i)
            std::copy_n(x.begin() + z.row_of(r, i) * moe.hidden, h, mine.begin() + i * moe.hidden);
          std::vector<float> out(mine.size(), std::numeric_limits<float>::quiet_NaN());
          std::vector<int> seen;
          if (small) {
            const SmallEpTraffic t = small_ep(group.rank(r), z, moe.hidden, moe.experts, mine, moe.callbacks(&seen), out);
            const size_t slice = static_cast<size_t>(z.max_local_rows()) * h * sizeof(float);
            EXPECT_EQ(t.gathered_bytes, slice * static_cast<size_t>(ranks - 1));
            EXPECT_EQ(t.scattered_bytes, slice * static_cast<size_t>(ranks - 1));
          } else {
            const ExpertParallelTraffic t =
                expert_parallel(group.rank(r), z, moe.hidden, moe.experts, mine, moe.callbacks(&seen), out);
            sent[static_cast<size_t>(r)] = t.dispatched_bytes;
            sent_back[static_cast<size_t>(r)] = t.combined_bytes;
          }
          // Only the rank's own experts, each once, ascending.
          for (size_t i = 0; i < seen.size(); ++i) {
            EXPECT_EQ(expert_rank(seen[i], moe.experts, ranks), r);
            if (i) {
              EXPECT_LT(seen[i - 1], seen[i]);
            }
          }
          for (int64_t i = 0; i < n; ++i)
            std::copy_n(out.begin() + i * moe.hidden, h, got.begin() + z.row_of(r, i) * moe.hidden);
        });
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::abs(want[i])))
              << (small ? "SmallEP" : "EP") << ", value " << i << " of " << rows << " rows on " << ranks << " ranks";
        if (!small) {
          // Every pair whose expert is on another rank went there and came back: N*A*D/S-like.
          size_t pairs_away = 0;
          for (int r = 0; r < ranks; ++r)
            for (int64_t i = 0; i < z.local_rows(r); ++i)
              for (int k = 0; k < moe.top_k; ++k)
                pairs_away += expert_rank(all.experts[static_cast<size_t>(z.row_of(r, i) * moe.top_k + k)], moe.experts,
                                          ranks) != r;
          EXPECT_EQ(std::accumulate(sent.begin(), sent.end(), size_t{0}), pairs_away * h * sizeof(float));
          EXPECT_EQ(std::accumulate(sent_back.begin(), sent_back.end(), size_t{0}), pairs_away * h * sizeof(float));
        }
      }
    }
  }
}

TEST(SmallEp, AFailedRankFailsItsPeersInsteadOfHangingThem) {
  std::mt19937 rng(fresh_seed());
  const ToyMoe moe(rng);
  const ZigzagStripes z{40, 2};
  InProcessGroup group(2, 600.0);
  std::vector<std::string> errors(2);
  on_ranks(2, [&](int r) {
    std::vector<float> mine(static_cast<size_t>(z.local_rows(r) * moe.hidden), 0.5f), out(mine.size());
    SmallEpCallbacks cb = moe.callbacks(nullptr);
    if (r == 1) cb.route = [](std::span<const float>, int64_t) -> MoeRouting { throw Error(ErrorKind::kInternal, "router kernel failed"); };
    try {
      small_ep(group.rank(r), z, moe.hidden, moe.experts, mine, cb, out);
      ADD_FAILURE() << "rank " << r << " finished";
    } catch (const Error& e) {
      errors[static_cast<size_t>(r)] = e.what();
      group.abort(fmt::format("rank {}: {}", r, e.what()));  // what a rank's error handler does
    }
  });
  EXPECT_NE(errors[1].find("router kernel failed"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("router kernel failed"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace hymoe
