// WriteAll: all of a buffer to a file descriptor (a file, a pipe), through short writes and
// EINTR.
//
// For local files and pipes only; a socket that may be nonblocking or a SAN socket has its own
// send loops (ftp/net/socket.h). Thread-safety: as write(2).
#pragma once

#include <cstddef>

namespace san::files {

// True once every byte is written; false with errno set at the first failed write (or EIO when
// write returned 0).
bool WriteAll(int fd, const void* data, size_t len);

}  // namespace san::files
