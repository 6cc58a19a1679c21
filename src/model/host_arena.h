// Anonymous host memory for loaded weights (internal to hymoe_model): one mapping, optionally
// bound to a NUMA node before first touch, with transparent huge pages requested.
#pragma once

#include <cstddef>

namespace hymoe {

// NUMA nodes with memory on this machine (1 when libnuma reports NUMA unavailable).
int numa_node_count();

class HostArena {
 public:
  HostArena() = default;
  // Maps `bytes` (rounded up to 2 MiB) of anonymous memory. node >= 0 binds it there (mbind,
  // MPOL_BIND); huge_pages asks for THP (madvise; ignored where the kernel says no).
  // Throws hymoe::Error: kResourceExhausted when the mapping fails, kIo when binding fails.
  HostArena(size_t bytes, int node, bool huge_pages);
  ~HostArena();
  HostArena(HostArena&& other) noexcept;
  HostArena& operator=(HostArena&& other) noexcept;
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  int node() const { return node_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
  int node_ = -1;
};

}  // namespace hymoe
