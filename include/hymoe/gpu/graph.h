// RAII CUDA graph captured from a stream: the work a function enqueues is captured (not run) and
// instantiated once; launch() replays it. Kernels launched with programmatic dependent launch
// (cudaLaunchAttributeProgrammaticStreamSerialization) become programmatic edges of the graph.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace hymoe::gpu {

class CapturedGraph {
 public:
  // Captures what `enqueue` launches on `stream` (thread-local capture mode); if `enqueue`
  // throws, the capture is ended and discarded and the exception passes on.
  CapturedGraph(cudaStream_t stream, const std::function<void()>& enqueue);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void launch(cudaStream_t stream) const;

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace hymoe::gpu
