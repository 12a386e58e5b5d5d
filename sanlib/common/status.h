// Status and Result<T>: how every layer below the POSIX boundary reports failure.
//
// A Status is an errno-style code plus the name of the call that failed (gRPC's PosixOSError style),
// so a log line or a fallback reason says "connect: ECONNREFUSED", not just "failed". kAgain
// ("would block / no credit / no resource right now") is an ordinary code, not an error to log.
// Thread-safety: plain values; copy freely. No exceptions anywhere in sanlib: callers test ok().
#pragma once

#include <cerrno>
#include <string>
#include <utility>

namespace san {

class Status {
 public:
  constexpr Status() = default;
  constexpr Status(int code, const char* call) : code_(code), call_(call) {}

  static constexpr Status Ok() { return Status(); }
  // The call's own errno, read at the point of failure.
  static Status FromErrno(const char* call) { return Status(errno, call); }

  constexpr bool ok() const { return code_ == 0; }
  constexpr bool would_block() const { return code_ == EAGAIN; }
  constexpr int code() const { return code_; }
  constexpr const char* call() const { return call_; }
  // "call: Error text (ECODE)"; "ok" for success.
  std::string ToString() const;

 private:
  int code_ = 0;
  const char* call_ = "";  // a string literal: the failing call or check
};

// Either a value or a non-ok Status. Output is only meaningful when ok().
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(status) {}      // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return value_; }
  const T& value() const& { return value_; }
  T&& value() && { return std::move(value_); }
  T* operator->() { return &value_; }
  T& operator*() & { return value_; }

 private:
  Status status_;
  T value_{};
};

}  // namespace san
