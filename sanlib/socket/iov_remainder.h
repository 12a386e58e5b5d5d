// IovRemainder: what is left of an application's iovec array during one call, advanced past the
// bytes taken -- a copy, kept inline for the usual handful of entries so the data path does not
// allocate. Used by the SAN data path and by a kernel-TCP read that must loop (late_upgrade.h).
// Thread-safety: one call's own object.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <vector>

namespace san {

class IovRemainder {
 public:
  IovRemainder(const iovec* iov, int count) : count_(count) {
    if (count > kInline) {
      heap_.assign(iov, iov + count);
      data_ = heap_.data();
    } else {
      std::copy(iov, iov + count, inline_);
      data_ = inline_;
    }
  }
  IovRemainder(const IovRemainder&) = delete;
  IovRemainder& operator=(const IovRemainder&) = delete;
  const iovec* data() const { return data_ + first_; }
  int count() const { return count_ - first_; }
  // Skips n bytes; true when nothing is left.
  bool Advance(size_t n) {
    while (first_ < count_ && n >= data_[first_].iov_len) n -= data_[first_++].iov_len;
    if (first_ == count_) return true;
    data_[first_].iov_base = static_cast<char*>(data_[first_].iov_base) + n;
    data_[first_].iov_len -= n;
    return false;
  }

 private:
  static constexpr int kInline = 8;
  iovec inline_[kInline];
  std::vector<iovec> heap_;
  iovec* data_ = nullptr;
  int count_ = 0;
  int first_ = 0;
};

}  // namespace san
