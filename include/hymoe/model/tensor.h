// A read-only view of one tensor held by a WeightStore: the bytes stay where the store put them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hymoe/model/dtype.h"

namespace hymoe {

struct TensorView {
  std::string name;             // checkpoint name, e.g. "model.layers.3.mlp.gate.weight"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;   // row-major, outermost first
  const std::byte* data = nullptr;  // nbytes readable bytes, aligned to at least the element size
  size_t nbytes = 0;            // == numel() * dtype_size(dtype)

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data); }
};

// A tensor's name, type and shape without its bytes: what writers, layouts and stores plan with.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
};

}  // namespace hymoe
