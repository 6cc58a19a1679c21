#include "hymoe/gpu/graph.h"

#include "hymoe/gpu/cuda_check.h"

namespace hymoe::gpu {

CapturedGraph::CapturedGraph(cudaStream_t stream, const std::function<void()>& enqueue) {
  HYMOE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream, &partial);
    if (partial) (void)cudaGraphDestroy(partial);
    throw;
  }
  HYMOE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
  const cudaError_t err = cudaGraphInstantiate(&exec_, graph_, 0);
  if (err != cudaSuccess) {
    (void)cudaGraphDestroy(graph_);
    HYMOE_CUDA_CHECK(err);
  }
}

CapturedGraph::~CapturedGraph() {
  if (exec_) (void)cudaGraphExecDestroy(exec_);
  if (graph_) (void)cudaGraphDestroy(graph_);
}

void CapturedGraph::launch(cudaStream_t stream) const {
  HYMOE_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

}  // namespace hymoe::gpu
