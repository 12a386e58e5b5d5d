#include "drpc/transport/data_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "san/san.h"
#include "sanlib/common/connection_errno.h"

namespace san::drpc {
namespace {

using Clock = std::chrono::steady_clock;
// How often a wait looks at `cancelled`: the longest a cancelled call keeps its thread.
constexpr std::chrono::milliseconds kSlice{200};
// One san_sendfile / san_recvfile call at most: a few of the channel's windows.
constexpr size_t kCallBytes = 4u << 20;

// Waits until sock is ready for events; `since` is when a byte last moved.
Status Wait(int sock, short events, const DataWait& wait, Clock::time_point since) {
  for (;;) {
    if (wait.cancelled && wait.cancelled()) return Status(ECANCELED, "data connection: cancelled");
    const Clock::time_point now = Clock::now();
    const Clock::time_point until = std::min(wait.deadline, since + wait.stall);
    if (now >= until) return Status(ETIMEDOUT, "data connection: no progress");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
    pollfd p{sock, events, 0};
    const int n = san_poll(&p, 1, static_cast<int>(std::min(left, kSlice).count()) + 1);
    if (n > 0) return Status::Ok();  // readable, writable, or an error the next call reports
    if (n < 0 && errno != EINTR) return Status::FromErrno("data connection: poll");
  }
}

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

}  // namespace

Status WaitReady(int sock, short events, const DataWait& wait) {
  return Wait(sock, events, wait, Clock::now());
}

Status SendAllOn(int sock, const void* buf, size_t len, const DataWait& wait) {
  const char* p = static_cast<const char*>(buf);
  Clock::time_point since = Clock::now();
  while (len > 0) {
    const ssize_t n = san_send(sock, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      since = Clock::now();
      continue;
    }
    if (n < 0 && !WouldBlock(errno)) return Status::FromErrno("data connection: send");
    if (Status s = Wait(sock, POLLOUT, wait, since); !s.ok()) return s;
  }
  return Status::Ok();
}

Status ReceiveExactOn(int sock, void* buf, size_t len, const DataWait& wait) {
  char* p = static_cast<char*>(buf);
  Clock::time_point since = Clock::now();
  while (len > 0) {
    const ssize_t n = san_recv(sock, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      since = Clock::now();
      continue;
    }
    if (n == 0) return Status(EPIPE, "data connection: closed early");
    if (!WouldBlock(errno)) return Status::FromErrno("data connection: recv");
    if (Status s = Wait(sock, POLLIN, wait, since); !s.ok()) return s;
  }
  return Status::Ok();
}

Status SendFileOn(int sock, int file_fd, uint64_t count, const DataWait& wait) {
  off_t offset = 0;
  Clock::time_point since = Clock::now();
  while (static_cast<uint64_t>(offset) < count) {
    const size_t want =
        static_cast<size_t>(std::min<uint64_t>(count - static_cast<uint64_t>(offset), kCallBytes));
    const ssize_t n = san_sendfile(sock, file_fd, &offset, want);
    if (n > 0) {
      since = Clock::now();
      continue;
    }
    if (n == 0) return Status(ENODATA, "sendfile: the file ended before its size");
    if (!WouldBlock(errno)) {
      const int err = errno;
      return Status(err, IsConnectionErrno(err) ? "data connection: sendfile" : "read the file");
    }
    if (Status s = Wait(sock, POLLOUT, wait, since); !s.ok()) return s;
  }
  return Status::Ok();
}

Result<uint64_t> ReceiveFileOn(int sock, int file_fd, uint64_t max, const DataWait& wait) {
  uint64_t got = 0;
  Clock::time_point since = Clock::now();
  for (;;) {
    // One byte past max is asked for, so a peer sending more than announced is caught.
    const size_t want = static_cast<size_t>(std::min<uint64_t>(max - got + 1, kCallBytes));
    const ssize_t n = san_recvfile(sock, file_fd, nullptr, want);
    if (n > 0) {
      got += static_cast<uint64_t>(n);
      if (got > max) return Status(EFBIG, "data connection: more bytes than announced");
      since = Clock::now();
      continue;
    }
    if (n == 0) return got;
    if (!WouldBlock(errno)) {
      const int err = errno;
      return Status(err, IsConnectionErrno(err) ? "data connection: recv" : "write the file");
    }
    if (Status s = Wait(sock, POLLIN, wait, since); !s.ok()) return s;
  }
}

}  // namespace san::drpc
