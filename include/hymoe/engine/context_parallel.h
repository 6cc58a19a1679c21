// The data movement of two-GPU prefill (DSLP, issue 44), written once over a Communicator so that
// the same code runs on NCCL ranks and on an in-process group (tests and CI):
//
//   ZigzagStripes          a prompt's rows over R ranks: 2R chunks, rank r holding chunks r and
//                          2R-1-r (one early, one late), so the causal attention work is even.
//   striped_attention_ring one rank's causal attention over the whole prompt: its own stripes'
//                          KV first, then the other ranks' KV passed around the ring (R-1 steps
//                          of send_recv), each partial merged by log-sum-exp. For MLA the rows
//                          passed are latent KV rows (576 values a token for DeepSeek-V3), not
//                          expanded keys and values.
//   small_ep / expert_parallel
//                          a MoE layer over ranks that each hold a share of the experts. SmallEP:
//                          all-gather the ranks' un-expanded tokens, route every token on every
//                          rank (the same router, the same choice), compute the rank's own experts
//                          into an [N, D] partial sum, reduce-scatter the partials (N*D values a
//                          rank each way, whatever top-k is). The standard scheme (the baseline):
//                          dispatch each (token, expert) pair's row to the expert's rank
//                          (all-to-all), compute there, send the weighted rows back (all-to-all),
//                          add them at the token's rank (N*A*D/S values a rank each way).
//
// The compute is the caller's (callbacks over host or device buffers); these functions own the
// layout, the positions and the communication.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "hymoe/engine/communicator.h"

namespace hymoe {

struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

struct ZigzagStripes {
  int64_t rows = 0;  // the prompt's
  int ranks = 1;

  // Chunk c of 2 * ranks: as even as possible, the first rows % (2 * ranks) one row longer.
  RowRange chunk(int c) const;
  // Rank r's two stripes, in prompt order: chunk r, then chunk 2R-1-r.
  std::array<RowRange, 2> of(int rank) const;
  int64_t local_rows(int rank) const;
  int64_t max_local_rows() const;
  // The prompt row of rank r's local row i (its first stripe's rows, then its second's).
  int64_t row_of(int rank, int64_t local) const;

  // The attention of rank q_rank's queries over rank k_rank's KV rows as blocks a windowed causal
  // kernel runs (mla_prefill's key windows: query i at position past + i sees keys j <= past + i):
  // one per (query stripe, key stripe) pair whose keys are not all in the queries' future, in
  // local row offsets; past = the query stripe's first row - the key stripe's (0 on the diagonal,
  // >= k_rows where every key is visible). Empty stripes give no block.
  struct Block {
    int64_t q_begin = 0, q_rows = 0, k_begin = 0, k_rows = 0, past = 0;
  };
  std::vector<Block> attention_blocks(int q_rank, int k_rank) const;
};

// Log-sum-exp merge of two partial attention outputs over disjoint key sets: for each of `rows`
// rows (each `heads` heads of `dim` values; lse per row and head, -inf where no key was seen),
// out_a/lse_a become the attention over both key sets. Plain C++ (host buffers).
void merge_attention_partials(float* out_a, float* lse_a, const float* out_b, const float* lse_b, int64_t rows,
                              int64_t heads, int64_t dim);

// One rank's part of striped causal attention (every rank calls it together). `own_kv` holds the
// rank's KV rows (local_rows(rank) rows of row_bytes); `ring` two buffers of max_local_rows() rows
// each for the passes. attend(kv, source_rank) computes this rank's queries against `kv`, the KV
// rows of source_rank's stripes (their prompt rows by ZigzagStripes::row_of, for the causal mask),
// and merges the result into the rank's output; it is called for the own rank first, then for
// the others in ring order (rank-1, rank-2, ...). The next pass is sent before the current
// attend runs, so a device implementation can overlap them.
void striped_attention_ring(Communicator& comm, const ZigzagStripes& stripes, size_t row_bytes,
                            std::span<const std::byte> own_kv, std::array<std::span<std::byte>, 2> ring,
                            const std::function<void(std::span<const std::byte> kv, int source_rank)>& attend);

// A MoE layer's routing as the callbacks see it: per token, top_k experts and weights.
struct MoeRouting {
  int top_k = 0;
  std::vector<int32_t> experts;  // [tokens * top_k]
  std::vector<float> weights;    // [tokens * top_k]
};

// Expert e's rank when `experts` experts are split over `ranks` ranks in contiguous blocks.
int expert_rank(int expert, int experts, int ranks);

// SmallEP over the communicator (every rank calls it together with its own tokens).
//   tokens      this rank's tokens, [local_rows(rank), hidden] FP32 (the stripes' rows)
//   route       route(all_tokens, n) for the gathered [n, hidden] tokens (in rank order: rank 0's
//               rows, then rank 1's, ...): the routing of each; every rank computes the same
//   expert_rows expert_rows(expert, rows, weights, all_tokens, partial): adds weight * expert(x)
//               of each listed row of all_tokens into partial[row] ([n, hidden]); called for this
//               rank's experts only, each once, in ascending order, with the rows that chose it
//   out         [local_rows(rank), hidden]: the routed experts' sum for this rank's tokens
// Rows are padded to max_local_rows() per rank for the collectives.
struct SmallEpCallbacks {
  std::function<MoeRouting(std::span<const float> all_tokens, int64_t n)> route;
  std::function<void(int expert, std::span<const int64_t> rows, std::span<const float> weights,
                     std::span<const float> all_tokens, std::span<float> partial)>
      expert_rows;
};
struct SmallEpTraffic {
  size_t gathered_bytes = 0;   // received by the all-gather (peers' rows, padding included)
  size_t scattered_bytes = 0;  // sent by the reduce-scatter (peers' slices)
};
SmallEpTraffic small_ep(Communicator& comm, const ZigzagStripes& stripes, int64_t hidden, int experts,
                        std::span<const float> tokens, const SmallEpCallbacks& callbacks, std::span<float> out);

// Standard expert parallelism over the communicator: this rank routes its own tokens, sends
// each (token, expert) pair's row to the expert's rank, computes the rows it receives for its
// experts (expert_rows over a [received, hidden] block, weights applied there), sends the
// results back and adds them per token, in top-k order. Same callbacks as small_ep, `route` on
// this rank's tokens only.
struct ExpertParallelTraffic {
  size_t dispatched_bytes = 0;  // rows sent to other ranks
  size_t combined_bytes = 0;    // result rows sent back to other ranks
};
ExpertParallelTraffic expert_parallel(Communicator& comm, const ZigzagStripes& stripes, int64_t hidden, int experts,
                                      std::span<const float> tokens, const SmallEpCallbacks& callbacks,
                                      std::span<float> out);

}  // namespace hymoe
