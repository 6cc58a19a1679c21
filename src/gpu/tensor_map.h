// TMA tensor maps for the launchers (host side): cuTensorMapEncodeTiled from the driver, reached
// through the runtime (no -lcuda), and the two map shapes the kernels read.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace hymoe::gpu::launch {

// A map over a row-major byte matrix [rows][cols] (FP8 weights or activations, a BF16 cache's
// rows; ld bytes between rows, a multiple of 16): boxes of box_rows x 128 bytes (one 128-byte
// swizzled row block, as the wgmma descriptors read it: wgmma_layout.h); elements outside the
// matrix are zero-filled. cudaErrorNotSupported when the driver has no encoder,
// cudaErrorInvalidValue when it refuses the shape.
cudaError_t encode_sw128_map(CUtensorMap& map, const void* base, int64_t rows, int64_t cols, int64_t ld,
                             int box_rows);

// A map over `elems` consecutive floats as a [1][elems] tensor, boxes of 1 x box elements (box a
// multiple of 4) that must start at a multiple of 4 elements; elements past the end are
// zero-filled.
cudaError_t encode_f32_row_map(CUtensorMap& map, const float* base, int64_t elems, int box);

}  // namespace hymoe::gpu::launch
