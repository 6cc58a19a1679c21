// Internal: a 64-byte-aligned buffer that grows to the largest size asked for and never shrinks,
// for per-thread kernel scratch (thread_local GrowingBuffer<T>): a call allocates only when its
// thread first meets a larger size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace hymoe::kernels::detail {

template <class T>
class GrowingBuffer {
 public:
  // At least n elements (contents unspecified after growth).
  T* at_least(int64_t n) {
    if (n > size_) {
      data_.reset(static_cast<T*>(::operator new(sizeof(T) * static_cast<size_t>(n), std::align_val_t{64})));
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(T* q) const { ::operator delete(q, std::align_val_t{64}); }
  };
  std::unique_ptr<T[], Free> data_;
  int64_t size_ = 0;
};

}  // namespace hymoe::kernels::detail
