// Host-to-device uploads that do not queue on the copy engines.
//
// A cudaMemcpyAsync from the host waits, on the device's host-to-device copy engine, behind every
// copy issued before it on any stream: while SLP streams a layer's experts (a few hundred ms of
// copies queued), a table of a few KB copied on the compute stream waits for all of them, and the
// compute stream with it. These uploads are kernels on the caller's stream instead:
// - upload_inline carries the bytes in the launches' parameters (kInlineUploadBytes each): any
//   host memory, read during the call, so the source may change as soon as it returns.
// - upload_mapped reads page-locked host memory (cudaHostAlloc, or registered with
//   cudaHostRegisterMapped) through its device mapping; stream-ordered like cudaMemcpyAsync from
//   pinned memory: the source must stay unchanged until the stream has run the upload.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace hymoe::gpu {

// Bytes carried by one inline launch (its parameters: 4 KB less the destination and count).
inline constexpr size_t kInlineUploadBytes = 4064;

void upload_inline(void* dst, const void* src, size_t bytes, cudaStream_t stream);
void upload_mapped(void* dst, const void* pinned_src, size_t bytes, cudaStream_t stream);

}  // namespace hymoe::gpu
