// Kernel launch with or without programmatic dependent launch (PDL, kernels/cuda/pdl.cuh): one
// cudaLaunchKernelEx whose attribute list holds cudaLaunchAttributeProgrammaticStreamSerialization
// when pdl is set. For .cu files only (the runtime's kernel-launch templates); the caller checks
// that the device has PDL (compute capability 9.0 or newer).
#pragma once

#include <cuda_runtime.h>

namespace hymoe::gpu::launch {

template <typename... Params, typename... Args>
cudaError_t launch_kernel_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, bool pdl,
                               cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = pdl ? attr : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Args&&>(args)...);
}

// The same without dynamic shared memory.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, bool pdl,
                          cudaStream_t stream, Args&&... args) {
  return launch_kernel_smem(kernel, grid, block, 0, pdl, stream, static_cast<Args&&>(args)...);
}

}  // namespace hymoe::gpu::launch
