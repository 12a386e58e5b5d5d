// ExecImage: the record an exec() leaves for the new image about the SAN connections it inherits.
//
// Before the real execve (exec_handoff.h), the old image packs every connection that moves into
// the new image -- its fd numbers there, a few socket flags and its exported stream
// (proto::StreamImage) -- into a sealed memfd that survives the exec, and names that memfd in the
// new image's environment (SAN_INHERIT=<fd>). The new image's layer reads it back at start-up.
//
// Layout (this build's: the new image runs the same preload library, checked by magic, version
// and record sizes; Stream::Import validates the rest):
//
//   FileHeader   {magic "SANX", version, record count, reserved}
//   per record:  RecordHeader {fd numbers naming the socket, flags, the endpoint's fd numbers,
//                              state lengths, stream parameters, buffers}
//                endpoint state bytes, stream state bytes
//
// The endpoint's fds are not passed over SCM_RIGHTS here: they are inherited, non-close-on-exec
// dups, named by number. Decode takes no fd: it returns numbers, which the adopter checks and only
// then owns. Pure logic (no syscalls): unit-tested and fuzzed (the memfd is input to the new
// image; a bad record must be refused, never crash it).
// Thread-safety: plain functions on caller-owned values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sanlib/common/status.h"
#include "sanlib/proto/stream.h"

namespace san::exec {

// The environment variable naming the memfd in the new image.
inline constexpr char kInheritVariable[] = "SAN_INHERIT";

inline constexpr size_t kMaxNumbers = 16;     // fd numbers one socket may have in the new image
inline constexpr size_t kMaxEndpointFds = 8;  // as handover.cc
inline constexpr size_t kMaxRecords = 4096;
inline constexpr size_t kMaxStateBytes = 1u << 20;

// One connection crossing the exec.
struct InheritedSocket {
  // The numbers that name the kernel socket in the new image (numbers[0] is its primary). For a
  // close-on-arrival socket, one private number the new image closes after posting FIN.
  std::vector<int> numbers;
  // All the application's numbers for it were close-on-exec: the new image only closes it (FIN),
  // as the last holder's close would have.
  bool close_on_arrival = false;
  bool nonblocking = false;
  bool read_shut = false;
  std::vector<int> endpoint_fds;  // the StreamImage's endpoint fds, by number
  proto::StreamImage image;       // image.endpoint.fds is empty here: see endpoint_fds
};

std::vector<std::byte> EncodeInheritance(const std::vector<InheritedSocket>& sockets);
// EINVAL (with what is wrong) for anything that is not a record this build wrote: sizes, counts,
// negative or repeated fd numbers.
Result<std::vector<InheritedSocket>> DecodeInheritance(std::span<const std::byte> bytes);

}  // namespace san::exec
