// Byte moving on a data connection (docs/drpc.md "Data connections"): a file sent or received on
// a nonblocking socket -- a SAN socket, or a kernel one when the client's target is plain TCP --
// with san_sendfile / san_recvfile, so over shared memory a file goes from the page cache into the
// peer's receive buffers, and back out into the page cache, with one copy on each side; on kernel
// TCP they are the kernel's sendfile and a receive into the file.
//
// Every wait is a san_poll in short slices, so a call ends by itself: when `cancelled` says so
// (the RPC went away), at `deadline`, or after `stall` without a byte moving (a peer that stopped
// reading or writing). Errors name the side: "data connection: ..." for the socket's, the file
// call's name for the file's (ENOSPC, EIO...).
// Thread-safety: stateless functions; a socket is used by one call at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "sanlib/common/status.h"

namespace san::drpc {

struct DataWait {
  std::function<bool()> cancelled;  // may be empty
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::chrono::milliseconds stall{30000};
};

// Waits until sock is ready for events (POLLIN on a listener: a connection to accept).
Status WaitReady(int sock, short events, const DataWait& wait);
// Sends exactly len bytes of buf.
Status SendAllOn(int sock, const void* buf, size_t len, const DataWait& wait);
// Receives exactly len bytes into buf (EPIPE "data connection: closed early" at EOF before).
Status ReceiveExactOn(int sock, void* buf, size_t len, const DataWait& wait);
// Sends the first count bytes of the file (from offset 0, whatever its file position); ENODATA
// if the file is shorter.
Status SendFileOn(int sock, int file_fd, uint64_t count, const DataWait& wait);
// Receives until the peer closes, appending to the file at its position: the bytes written.
// More than max bytes is EFBIG (the peer sent more than it announced).
Result<uint64_t> ReceiveFileOn(int sock, int file_fd, uint64_t max, const DataWait& wait);

}  // namespace san::drpc
