// Moving bytes between a SAN socket and a file without passing them through the caller's memory:
// san_recvfile (socket -> file, written straight out of the channel's receive buffers: one copy)
// and san_sendfile (file -> socket, sendfile(2)'s contract; on shm the file is read straight into
// the peer's receive buffers: one copy; on verbs into a registered staging slot the NIC sends).
//
// Both return what their C API counterparts document in <san/san.h> (-1 with errno). On a socket
// that is plain kernel TCP they use the kernel socket with the same results. Thread-safety: as the
// C API; a RecvToFile in progress holds the first queued bytes on loan (proto::Stream::Borrow), so
// other readers of the same socket wait for it.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace san {

ssize_t RecvToFile(int sock, int out_fd, off_t* offset, size_t count);
ssize_t SendFromFile(int sock, int in_fd, off_t* offset, size_t count);

}  // namespace san
