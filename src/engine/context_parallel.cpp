#include "hymoe/engine/context_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "hymoe/common/error.h"

namespace hymoe {

RowRange ZigzagStripes::chunk(int c) const {
  const int64_t chunks = 2 * static_cast<int64_t>(ranks);
  const int64_t base = rows / chunks, extra = rows % chunks;
  const int64_t begin = c * base + std::min<int64_t>(c, extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

std::array<RowRange, 2> ZigzagStripes::of(int rank) const { return {chunk(rank), chunk(2 * ranks - 1 - rank)}; }

int64_t ZigzagStripes::local_rows(int rank) const {
  const auto s = of(rank);
  return s[0].size() + s[1].size();
}

int64_t ZigzagStripes::max_local_rows() const {
  int64_t m = 0;
  for (int r = 0; r < ranks; ++r) m = std::max(m, local_rows(r));
  return m;
}

int64_t ZigzagStripes::row_of(int rank, int64_t local) const {
  const auto s = of(rank);
  return local < s[0].size() ? s[0].begin + local : s[1].begin + (local - s[0].size());
}

std::vector<ZigzagStripes::Block> ZigzagStripes::attention_blocks(int q_rank, int k_rank) const {
  std::vector<Block> blocks;
  const auto qs = of(q_rank), ks = of(k_rank);
  int64_t q_local = 0;
  for (const RowRange& q : qs) {
    int64_t k_local = 0;
    for (const RowRange& k : ks) {
      // Stripes are whole chunks: a key stripe is the query stripe itself, wholly before it or
      // wholly after it (nothing visible).
      if (q.size() > 0 && k.size() > 0 && k.begin <= q.begin)
        blocks.push_back({q_local, q.size(), k_local, k.size(), q.begin - k.begin});
      k_local += k.size();
    }
    q_local += q.size();
  }
  return blocks;
}

void merge_attention_partials(float* out_a, float* lse_a, const float* out_b, const float* lse_b, int64_t rows,
                              int64_t heads, int64_t dim) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < rows * heads; ++i) {
    const float lb = lse_b[i];
    if (lb == ninf) continue;
    float* oa = out_a + i * dim;
    const float* ob = out_b + i * dim;
    const float la = lse_a[i];
    if (la == ninf) {
      std::memcpy(oa, ob, static_cast<size_t>(dim) * sizeof(float));
      lse_a[i] = lb;
      continue;
    }
    const float m = std::max(la, lb);
    const float wa = std::exp(la - m), wb = std::exp(lb - m);
    const float inv = 1.0f / (wa + wb);
    for (int64_t d = 0; d < dim; ++d) oa[d] = (wa * oa[d] + wb * ob[d]) * inv;
    lse_a[i] = m + std::log(wa + wb);
  }
}

void striped_attention_ring(Communicator& comm, const ZigzagStripes& stripes, size_t row_bytes,
                            std::span<const std::byte> own_kv, std::array<std::span<std::byte>, 2> ring,
                            const std::function<void(std::span<const std::byte> kv, int source_rank)>& attend) {
  const int ranks = comm.size(), me = comm.rank();
  HYMOE_CHECK(stripes.ranks == ranks, kInvalidArgument, "striped attention: stripes for {} ranks on a group of {}",
              stripes.ranks, ranks);
  const size_t own_bytes = static_cast<size_t>(stripes.local_rows(me)) * row_bytes;
  HYMOE_CHECK(own_kv.size() >= own_bytes, kInvalidArgument,
              "striped attention: rank {}'s KV holds {} bytes, its stripes need {}", me, own_kv.size(), own_bytes);
  const size_t ring_bytes = static_cast<size_t>(stripes.max_local_rows()) * row_bytes;
  HYMOE_CHECK(ranks == 1 || (ring[0].size() >= ring_bytes && ring[1].size() >= ring_bytes), kInvalidArgument,
              "striped attention: ring buffers of {} and {} bytes, a pass needs {}", ring[0].size(), ring[1].size(),
              ring_bytes);
  std::span<const std::byte> cur = own_kv.first(own_bytes);
  for (int s = 0; s < ranks; ++s) {
    const int holder = (me - s + ranks) % ranks;  // whose KV `cur` is
    std::span<const std::byte> next;
    if (s + 1 < ranks) {
      // Pass `cur` on to the next rank and take the previous rank's: the KV of rank me - s - 1.
      const int source = (me - s - 1 + 2 * ranks) % ranks;
      const size_t recv_bytes = static_cast<size_t>(stripes.local_rows(source)) * row_bytes;
      std::span<std::byte> buf = ring[static_cast<size_t>(s % 2)];
      comm.send_recv(cur.data(), cur.size(), (me + 1) % ranks, buf.data(), recv_bytes, (me - 1 + ranks) % ranks);
      next = buf.first(recv_bytes);
    }
    attend(cur, holder);
    cur = next;
  }
}

int expert_rank(int expert, int experts, int ranks) {
  return static_cast<int>(static_cast<int64_t>(expert) * ranks / experts);
}

namespace {

void check_routing(const MoeRouting& r, int64_t n, int experts) {
  HYMOE_CHECK(r.top_k >= 1 && r.experts.size() == static_cast<size_t>(n * r.top_k) &&
                  r.weights.size() == r.experts.size(),
              kInvalidArgument, "MoE routing: {} experts and {} weights for {} tokens of top-{}", r.experts.size(),
              r.weights.size(), n, r.top_k);
  for (int32_t e : r.experts)
    HYMOE_CHECK(e >= 0 && e < experts, kInvalidArgument, "MoE routing: expert {} of {}", e, experts);
}

}  // namespace

SmallEpTraffic small_ep(Communicator& comm, const ZigzagStripes& stripes, int64_t hidden, int experts,
                        std::span<const float> tokens, const SmallEpCallbacks& cb, std::span<float> out) {
  const int ranks = comm.size(), me = comm.rank();
  HYMOE_CHECK(stripes.ranks == ranks, kInvalidArgument, "SmallEP: stripes for {} ranks on a group of {}", stripes.ranks,
              ranks);
  const int64_t mine = stripes.local_rows(me), pad = stripes.max_local_rows(), n = stripes.rows;
  const size_t h = static_cast<size_t>(hidden);
  HYMOE_CHECK(tokens.size() >= static_cast<size_t>(mine) * h && out.size() >= static_cast<size_t>(mine) * h,
              kInvalidArgument, "SmallEP: rank {} has {} rows of {} values; tokens hold {}, out {}", me, mine, hidden,
              tokens.size(), out.size());
  // All-gather the padded rows, then drop the padding: [n, hidden] in rank order.
  std::vector<float> send(static_cast<size_t>(pad) * h, 0.0f);
  std::copy_n(tokens.begin(), static_cast<size_t>(mine) * h, send.begin());
  std::vector<float> gathered(static_cast<size_t>(ranks * pad) * h);
  comm.all_gather(send.data(), gathered.data(), send.size() * sizeof(float));
  std::vector<float> all(static_cast<size_t>(n) * h);
  std::vector<int64_t> first(static_cast<size_t>(ranks) + 1, 0);  // rank r's rows in `all`
  for (int r = 0; r < ranks; ++r) {
    const int64_t rows = stripes.local_rows(r);
    first[static_cast<size_t>(r) + 1] = first[static_cast<size_t>(r)] + rows;
    std::copy_n(gathered.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r * pad) * h),
                static_cast<size_t>(rows) * h, all.begin() + static_cast<ptrdiff_t>(first[static_cast<size_t>(r)] * hidden));
  }
  const MoeRouting routing = cb.route(all, n);
  check_routing(routing, n, experts);
  // This rank's experts, ascending, each with the rows that chose it.
  std::vector<float> partial(static_cast<size_t>(n) * h, 0.0f);
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(experts));
  std::vector<std::vector<float>> weights_of(static_cast<size_t>(experts));
  for (int64_t t = 0; t < n; ++t) {
    for (int k = 0; k < routing.top_k; ++k) {
      const size_t i = static_cast<size_t>(t * routing.top_k + k);
      const int e = routing.experts[i];
      if (expert_rank(e, experts, ranks) != me) continue;
      rows_of[static_cast<size_t>(e)].push_back(t);
      weights_of[static_cast<size_t>(e)].push_back(routing.weights[i]);
    }
  }
  for (int e = 0; e < experts; ++e) {
    if (!rows_of[static_cast<size_t>(e)].empty())
      cb.expert_rows(e, rows_of[static_cast<size_t>(e)], weights_of[static_cast<size_t>(e)], all, partial);
  }
  // Reduce-scatter the partial sums back to each row's rank (padded slices).
  std::vector<float> padded(static_cast<size_t>(ranks * pad) * h, 0.0f);
  for (int r = 0; r < ranks; ++r)
    std::copy_n(partial.begin() + static_cast<ptrdiff_t>(first[static_cast<size_t>(r)] * hidden),
                static_cast<size_t>(stripes.local_rows(r)) * h,
                padded.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r * pad) * h));
  std::vector<float> mine_sum(static_cast<size_t>(pad) * h);
  comm.reduce_scatter_sum(padded.data(), mine_sum.data(), static_cast<size_t>(pad) * h);
  std::copy_n(mine_sum.begin(), static_cast<size_t>(mine) * h, out.begin());
  const size_t slice = static_cast<size_t>(pad) * h * sizeof(float);
  return {slice * static_cast<size_t>(ranks - 1), slice * static_cast<size_t>(ranks - 1)};
}

ExpertParallelTraffic expert_parallel(Communicator& comm, const ZigzagStripes& stripes, int64_t hidden, int experts,
                                      std::span<const float> tokens, const SmallEpCallbacks& cb,
                                      std::span<float> out) {
  const int ranks = comm.size(), me = comm.rank();
  HYMOE_CHECK(stripes.ranks == ranks, kInvalidArgument, "expert parallel: stripes for {} ranks on a group of {}",
              stripes.ranks, ranks);
  const int64_t mine = stripes.local_rows(me);
  const size_t h = static_cast<size_t>(hidden), row_bytes = h * sizeof(float);
  const size_t R = static_cast<size_t>(ranks);
  HYMOE_CHECK(tokens.size() >= static_cast<size_t>(mine) * h && out.size() >= static_cast<size_t>(mine) * h,
              kInvalidArgument, "expert parallel: rank {} has {} rows of {} values; tokens hold {}, out {}", me, mine,
              hidden, tokens.size(), out.size());
  const MoeRouting routing = cb.route(tokens.first(static_cast<size_t>(mine) * h), mine);
  check_routing(routing, mine, experts);
  const size_t pairs = static_cast<size_t>(mine * routing.top_k);
  // Dispatch: each (token, expert) pair's row to the expert's rank, grouped by rank (pair order
  // within a rank), with its expert and weight beside it.
  struct Meta {
    int32_t expert;
    float weight;
  };
  std::vector<size_t> count(R, 0);
  for (int32_t e : routing.experts) ++count[static_cast<size_t>(expert_rank(e, experts, ranks))];
  std::vector<size_t> offset(R + 1, 0);
  for (size_t r = 0; r < R; ++r) offset[r + 1] = offset[r] + count[r];
  std::vector<size_t> slot_of(pairs);  // pair -> its position in the send order
  std::vector<float> rows(pairs * h);
  std::vector<Meta> meta(pairs);
  {
    std::vector<size_t> fill(offset.begin(), offset.end() - 1);
    for (size_t i = 0; i < pairs; ++i) {
      const int e = routing.experts[i];
      const size_t p = fill[static_cast<size_t>(expert_rank(e, experts, ranks))]++;
      slot_of[i] = p;
      std::copy_n(tokens.begin() + static_cast<ptrdiff_t>((i / static_cast<size_t>(routing.top_k)) * h), h,
                  rows.begin() + static_cast<ptrdiff_t>(p * h));
      meta[p] = {e, routing.weights[i]};
    }
  }
  // Every rank learns how many pairs each peer sends it.
  std::vector<size_t> counts_all(R * R);
  comm.all_gather(count.data(), counts_all.data(), R * sizeof(size_t));
  std::vector<size_t> recv_count(R), recv_offset(R + 1, 0);
  for (size_t r = 0; r < R; ++r) {
    recv_count[r] = counts_all[r * R + static_cast<size_t>(me)];
    recv_offset[r + 1] = recv_offset[r] + recv_count[r];
  }
  const size_t received = recv_offset[R];
  auto scaled = [](const std::vector<size_t>& v, size_t unit, size_t n) {
    std::vector<size_t> s(n);
    for (size_t i = 0; i < n; ++i) s[i] = v[i] * unit;
    return s;
  };
  std::vector<float> in_rows(received * h);
  std::vector<Meta> in_meta(received);
  comm.all_to_all_v(rows.data(), scaled(count, row_bytes, R), scaled(offset, row_bytes, R), in_rows.data(),
                    scaled(recv_count, row_bytes, R), scaled(recv_offset, row_bytes, R));
  comm.all_to_all_v(meta.data(), scaled(count, sizeof(Meta), R), scaled(offset, sizeof(Meta), R), in_meta.data(),
                    scaled(recv_count, sizeof(Meta), R), scaled(recv_offset, sizeof(Meta), R));
  // Compute the received rows per expert (ascending), the weight applied here.
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(experts));
  std::vector<std::vector<float>> weights_of(static_cast<size_t>(experts));
  for (size_t i = 0; i < received; ++i) {
    const Meta m = in_meta[i];
    HYMOE_CHECK(m.expert >= 0 && m.expert < experts && expert_rank(m.expert, experts, ranks) == me, kInternal,
                "expert parallel: rank {} received a row for expert {}, not its own", me, m.expert);
    rows_of[static_cast<size_t>(m.expert)].push_back(static_cast<int64_t>(i));
    weights_of[static_cast<size_t>(m.expert)].push_back(m.weight);
  }
  std::vector<float> results(received * h, 0.0f);
  for (int e = 0; e < experts; ++e) {
    if (!rows_of[static_cast<size_t>(e)].empty())
      cb.expert_rows(e, rows_of[static_cast<size_t>(e)], weights_of[static_cast<size_t>(e)], in_rows, results);
  }
  // Combine: the results back to the pairs' ranks, added per token in top-k order.
  std::vector<float> back(pairs * h);
  comm.all_to_all_v(results.data(), scaled(recv_count, row_bytes, R), scaled(recv_offset, row_bytes, R), back.data(),
                    scaled(count, row_bytes, R), scaled(offset, row_bytes, R));
  std::fill_n(out.begin(), static_cast<size_t>(mine) * h, 0.0f);
  for (size_t i = 0; i < pairs; ++i) {
    float* dst = out.data() + (i / static_cast<size_t>(routing.top_k)) * h;
    const float* src = back.data() + slot_of[i] * h;
    for (size_t d = 0; d < h; ++d) dst[d] += src[d];
  }
  const size_t to_peers = pairs - count[static_cast<size_t>(me)];
  const size_t back_to_peers = received - recv_count[static_cast<size_t>(me)];
  return {to_peers * row_bytes, back_to_peers * row_bytes};
}

}  // namespace hymoe
