// MLA prefill attention through cuDNN's fused flash attention (the backend graph API; cuDNN 9 is
// loaded at run time, so builds and machines without it still work). Same parameters and result
// as mla_prefill() (mla_prefill.h), causal and chunked (past > 0) alike.
//
// cuDNN takes one K tensor per head, and MLA's rope key k_pe is shared by all heads, so K is
// first gathered into a workspace as [kv, heads, 192] (k_nope | k_pe), unless the caller keeps
// k_pe per head right after k_nope (k_pe == k_nope + 128, k_pe_head_stride == k_head_stride,
// same token stride: e.g. a [kv, heads, 320] k_nope | k_pe | v buffer), which is read in place;
// Q, V and the output are read and written in place through their strides. The graph is the one cuDNN's frontend builds
// for scaled dot-product attention (Q K^T, scale, causal mask from row/column indices, softmax,
// P V); chunked prefill shifts the row index by `past`. An execution plan is built per
// (tokens, keys, strides) and cached; building one compiles cuDNN's kernel (NVRTC) the first time.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "hymoe/gpu/mla_prefill.h"

namespace hymoe::gpu {

class MemoryBudget;

class MlaPrefillCudnn {
 public:
  // Whether cuDNN can be used here (library found, headers at build time, a device); the reason
  // otherwise.
  static bool available(std::string* why = nullptr);

  // On the current device. Throws kUnsupported when !available(). The workspace (gathered K and
  // cuDNN's own) is counted against budget when one is given. autotune: the first run of each
  // shape times every engine cuDNN's heuristics offer and keeps the fastest (otherwise the
  // heuristics' first choice runs).
  explicit MlaPrefillCudnn(MemoryBudget* budget = nullptr, bool autotune = false);
  ~MlaPrefillCudnn();
  MlaPrefillCudnn(const MlaPrefillCudnn&) = delete;
  MlaPrefillCudnn& operator=(const MlaPrefillCudnn&) = delete;

  // Whether cuDNN has an engine for p's shapes and strides (builds and caches the plan; false
  // when the graph is refused, with the reason in *why). Pointers may be null; when they are set
  // they also decide whether K is read in place (see above), which is a different plan.
  bool supports(const MlaPrefillParams& p, std::string* why = nullptr);
  // Same checks as mla_prefill(); throws kUnsupported when !supports(p). Stream-ordered; the
  // workspace is reused by the next call, so calls on different streams must not overlap.
  void run(const MlaPrefillParams& p, cudaStream_t stream);

  // Plans built so far and the time the last build took (first use of a shape).
  int plans() const;
  // How many engines cuDNN offers for p's shapes (0 when refused); builds the plan.
  int engines(const MlaPrefillParams& p);
  double last_build_ms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe::gpu
