#include "host_arena.h"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"

namespace hymoe {

int numa_node_count() {
  if (numa_available() < 0) return 1;
  return std::max(1, numa_num_configured_nodes());
}

HostArena::HostArena(size_t bytes, int node, bool huge_pages) : size_(bytes), node_(node) {
  constexpr size_t kHuge = 2u << 20;
  mapped_ = std::max<size_t>(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  HYMOE_CHECK(p != MAP_FAILED, kResourceExhausted, "cannot map {} bytes of host memory: {}",
              mapped_, std::strerror(errno));
  data_ = static_cast<std::byte*>(p);
  if (huge_pages && ::madvise(p, mapped_, MADV_HUGEPAGE) != 0) {
    log::get("load")->debug("madvise(MADV_HUGEPAGE) refused: {}", std::strerror(errno));
  }
  if (node >= 0) {
    const int max_node = numa_max_node();
    if (node > max_node) {
      ::munmap(p, mapped_);
      data_ = nullptr;
      HYMOE_THROW(kInvalidArgument, "NUMA node {} does not exist (highest is {})", node, max_node);
    }
    const size_t bits_per_word = 8 * sizeof(unsigned long);
    std::vector<unsigned long> mask((static_cast<size_t>(max_node) + 2) / bits_per_word + 1, 0);
    mask[static_cast<size_t>(node) / bits_per_word] |= 1ul << (static_cast<size_t>(node) % bits_per_word);
    if (::mbind(p, mapped_, MPOL_BIND, mask.data(), static_cast<unsigned long>(max_node) + 2, 0) != 0) {
      const int err = errno;
      ::munmap(p, mapped_);
      data_ = nullptr;
      HYMOE_THROW(kIo, "mbind of {} bytes to NUMA node {} failed: {}", mapped_, node,
                  std::strerror(err));
    }
  }
}

HostArena::~HostArena() {
  if (data_) ::munmap(data_, mapped_);
}

HostArena::HostArena(HostArena&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)),
      node_(other.node_) {}

HostArena& HostArena::operator=(HostArena&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    node_ = other.node_;
  }
  return *this;
}

}  // namespace hymoe
