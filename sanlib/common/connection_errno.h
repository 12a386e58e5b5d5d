// IsConnectionErrno: whether an errno from a send, recv, sendfile or recvfile on a connected
// stream socket is the connection's (EPIPE, ECONNRESET, ...). The file-transfer calls report the
// socket's errors and the file's in one errno; anything not listed here is taken as the file's
// (EIO, EINVAL, EOVERFLOW, ENOSPC, EBADF, ...): the two sets do not overlap on a connected socket.
// Thread-safety: a pure function.
#pragma once

#include <cerrno>

namespace san {

inline bool IsConnectionErrno(int err) {
  switch (err) {
    case EPIPE:
    case ECONNRESET:
    case ECONNABORTED:
    case ENOTCONN:
    case ESHUTDOWN:
    case ETIMEDOUT:
    case ENETDOWN:
    case ENETUNREACH:
    case ENETRESET:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ENOTSOCK:
    case EDESTADDRREQ:
      return true;
    default:
      return false;
  }
}

}  // namespace san
