// Walking iovec arrays, for the stream's send paths (private to the stream's implementation).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>

namespace san::proto::stream {

inline size_t IovLength(const iovec* iov, int iovcnt) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  return total;
}

// Hands out an iovec array as contiguous pieces, in order, skipping empty entries.
class IovCursor {
 public:
  IovCursor(const iovec* iov, int iovcnt) : iov_(iov), count_(iovcnt) { Skip(); }
  bool done() const { return index_ >= count_; }
  // The next contiguous piece of at most `max` bytes.
  iovec Take(size_t max) {
    iovec piece{static_cast<char*>(iov_[index_].iov_base) + offset_,
                std::min(max, iov_[index_].iov_len - offset_)};
    offset_ += piece.iov_len;
    Skip();
    return piece;
  }

 private:
  void Skip() {
    while (index_ < count_ && offset_ == iov_[index_].iov_len) {
      ++index_;
      offset_ = 0;
    }
  }
  const iovec* iov_;
  int count_;
  int index_ = 0;
  size_t offset_ = 0;
};

}  // namespace san::proto::stream
