// SharedMapping: a memfd-backed MAP_SHARED region, the home of every piece of state that two
// processes (peers, or a parent and its fork child) must see identically.
//
// Created with mode 0600 semantics (memfd is private to the creator until its fd is passed over
// SCM_RIGHTS). Thread-safety: the object itself is not shared between threads without a lock; the
// memory it maps is, and its users synchronise with atomics. Unmaps on destruction; the memfd is
// owned too so it can be handed to a peer.
#pragma once

#include <cstddef>

#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"

namespace san {

class SharedMapping {
 public:
  SharedMapping() = default;
  SharedMapping(SharedMapping&& other) noexcept;
  SharedMapping& operator=(SharedMapping&& other) noexcept;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  ~SharedMapping();

  // A new zero-filled region of `size` bytes (rounded up to the page size).
  static Result<SharedMapping> Create(const char* name, size_t size);
  // Maps a region a peer handed over. Fails with EINVAL unless the file is exactly `expected_size`
  // bytes: the peer chooses the fd, we choose the size we are prepared to trust.
  static Result<SharedMapping> Attach(UniqueFd fd, size_t expected_size);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_.get(); }

 private:
  void Unmap();
  UniqueFd fd_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace san
