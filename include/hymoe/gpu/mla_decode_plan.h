// A decode step's work list for MLA decode attention: the batch's cached tokens cut into chunks of
// one length across all sequences, so that a batch of mixed lengths (one 64K context beside seven
// of 1K) spreads its work over the GPU by tokens, not by the longest sequence. Without it
// (MlaDecodeParams::work_list null) every sequence is cut into num_splits chunks of the longest
// one's length, and the short sequences leave their chunks empty while the long one's few blocks
// carry the call.
//
// mla_decode_plan runs one small kernel over the device's seq_lens (no host round trip, so a
// captured decode step replays it with each step's lengths); every layer of the step then reuses
// the list. In a one-item list item i is the work of split block i (grid (head groups,
// num_splits, batch) taken as batch * num_splits items in order): sequence b, tokens [start, end)
// - or none (b = -1) past the items used; a segmented list (below) gives each block a run of
// items instead. The split-K merge reads each sequence's items from `first`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hymoe::gpu {

// Layout of a work list (int32): a header {chunk (a segmented list: a slot's part, costs included,
// in tokens), items used, slots, 0}, then batch * num_splits
// items {sequence or -1, start, end, slot} (16 bytes each), then the first item of each sequence
// and the items used (batch + 1 values: sequence b owns items first[b] .. first[b + 1] - 1), then
// (segmented lists, below) the first item of each slot and the items used (slots + 1 values; room
// for batch * num_splits + 1). A list of one item a block has slots 0 and every item's slot 0.
inline constexpr int kMlaWorkHeaderInts = 4;
inline constexpr int kMlaWorkItemInts = 4;
inline constexpr int kMlaWorkTokens = 64;  // chunks are multiples of this (the wgmma tile)

// Bytes of a work list (either kind) for `batch` sequences and `num_splits` items a sequence on
// average.
size_t mla_decode_work_list_bytes(int batch, int num_splits);

// Items (blocks of one 64-head group) that fill `multiprocessors` SMs once: one block an SM.
int mla_decode_wave_items(int multiprocessors, int heads);

// num_splits for a planned call whose lengths the host does not know (a decode step captured
// once and replayed): room for the planner's target, whole waves of items - one wave up to
// wave_items sequences, ceil(batch / wave_items) waves beyond - so that even a batch of nearly a
// wave has items to split its long sequences over (40 sequences: 2 splits, 80 items). Items
// the list leaves unused still cost their blocks: an unused block needs a free SM like any other,
// and where the wave takes every SM some of them wait for the previous kernel's tail, which
// delays the merge (H200: 1-2 us of a 15-20 us call at 1K-8K contexts; docs/experiments.md, MLA
// decode).
int mla_decode_plan_splits(int multiprocessors, int batch, int heads);

// num_splits for lengths the host knows (a step's scheduler has them): the fewest that hold the
// one-wave list's items, ceil(items used / batch), so that almost no block is left unused.
int mla_decode_plan_splits(int multiprocessors, int heads, std::span<const int32_t> seq_lens);

// The chunk: the smallest multiple of 64 tokens, at least 128 - and at least 256 where 128-token
// chunks would make items for half of wave_items or more (a block's start and partials then cost
// more than the work they spread on the H200; docs/experiments.md, MLA decode) - such that the
// sequences' chunks, ceil(len / chunk) each, number at most the target: whole waves of items,
// ceil(batch / wave_items) * wave_items, and at most batch * num_splits. Items are laid out
// sequence by sequence. The host mirror returns the exact bytes the kernel writes (tests compare
// them); seq_lens each >= 1.
std::vector<int32_t> mla_decode_plan_host(std::span<const int32_t> seq_lens, int num_splits,
                                          int wave_items);

// Writes the work list for the device's seq_lens[batch] into work_list
// (mla_decode_work_list_bytes(batch, num_splits), 16-byte aligned). Stream-ordered.
void mla_decode_plan(const int32_t* seq_lens, int batch, int num_splits, int wave_items,
                     int32_t* work_list, cudaStream_t stream);

// Segmented lists (MlaDecodeParams::work_slots; kWgmmaPingPong walks them): a block takes not one
// chunk but a run of consecutive items - the tail of one sequence, whole sequences, the head of
// another - so that a batch near a wave of sequences (one 64K beside 39 of 1K: one-item blocks
// need 2432-token chunks for 1598 tokens of work a block) splits its work evenly. The batch's
// 64-token tiles, each sequence's preceded by kMlaSegmentCostTiles of cost for a segment's fixed
// work (Q, the pipeline's first tiles, the partials), are laid end to end and cut into `slots`
// equal parts of ceil(total / slots) tiles; slot k (a block per 64-head group, grid (head groups,
// slots)) computes the items whose first tile lies in part k. A sequence is cut where a part
// boundary falls inside its tiles, so the items number at most slots + batch - 1: num_splits
// from mla_decode_segment_splits holds them. Each item's slot is its 4th int.
inline constexpr int kMlaSegmentCostTiles = 2;

// Slots of a segmented list: whole waves of wave_items, as many as the batch's sequences need
// (ceil(batch / wave_items) waves).
int mla_decode_segment_slots(int multiprocessors, int heads, int batch);

// The fewest num_splits whose batch * num_splits items hold a segmented list of `slots` slots
// (slots + batch - 1 items).
int mla_decode_segment_splits(int batch, int slots);

// Host mirror of mla_decode_plan_segments (byte-exact); seq_lens each >= 1, slots >= 1 and
// slots + batch - 1 <= batch * num_splits. cost_tiles: a sequence's fixed cost, 0..64 tiles.
std::vector<int32_t> mla_decode_plan_segments_host(std::span<const int32_t> seq_lens,
                                                   int num_splits, int slots,
                                                   int cost_tiles = kMlaSegmentCostTiles);

// Writes the segmented work list for the device's seq_lens[batch] (one block, every layer of the
// step reuses it). Stream-ordered.
void mla_decode_plan_segments(const int32_t* seq_lens, int batch, int num_splits, int slots,
                              int32_t* work_list, cudaStream_t stream,
                              int cost_tiles = kMlaSegmentCostTiles);

}  // namespace hymoe::gpu
