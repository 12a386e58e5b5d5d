// Whole messages on a kernel socket by a deadline: nonblocking sends and receives, waiting in
// poll between them. For the socket layer's own short exchanges on a connection's kernel socket
// (san_upgrade's handshake, the move to TCP's handover), never the application's data.
// Thread-safety: pure functions of their arguments. Calls go straight to the kernel (kernel.h).
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "sanlib/common/status.h"

namespace san {

// Waits for `events` on fd until `deadline_ns`: ETIMEDOUT, or the poll error.
Status WaitFd(int fd, short events, uint64_t deadline_ns);
// All of `data`, or ETIMEDOUT / the send error (no SIGPIPE).
Status SendAll(int fd, const std::byte* data, size_t len, uint64_t deadline_ns);
// Exactly `len` bytes, or ECONNRESET at EOF, ETIMEDOUT, the receive error.
Status RecvAll(int fd, std::byte* data, size_t len, uint64_t deadline_ns);

}  // namespace san
