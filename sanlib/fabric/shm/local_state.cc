#include "sanlib/fabric/shm/local_state.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace san::fabric::shm {

LocalRegion::LocalRegion(LocalRegion&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

LocalRegion& LocalRegion::operator=(LocalRegion&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

LocalRegion::~LocalRegion() {
  if (data_) munmap(data_, size_);
}

Result<LocalRegion> LocalRegion::Create(uint32_t send_queue_size) {
  const size_t size = SizeFor(send_queue_size);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mmap(local state)");
  new (p) LocalState();  // zero pages are already a valid all-zero state; this starts its lifetime
  LocalRegion r;
  r.data_ = p;
  r.size_ = size;
  return r;
}

}  // namespace san::fabric::shm
