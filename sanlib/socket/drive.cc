// The non-template half of drive.h.
#include "sanlib/socket/drive.h"

#include <sys/socket.h>
#include <sys/time.h>

#include "sanlib/common/kernel.h"
#include "sanlib/socket/tcp_move.h"

namespace san {

uint64_t TimeoutDeadline(SanSocket& s, bool want_write, uint64_t start) {
  timeval tv{};
  socklen_t len = sizeof tv;
  const int name = want_write ? SO_SNDTIMEO : SO_RCVTIMEO;
  if (kernel::getsockopt(s.fd, SOL_SOCKET, name, &tv, &len) != 0 ||
      (tv.tv_sec <= 0 && tv.tv_usec <= 0)) {
    return kNoDeadline;
  }
  return start + static_cast<uint64_t>(tv.tv_sec) * 1000000000 +
         static_cast<uint64_t>(tv.tv_usec) * 1000;
}

Result<size_t> AfterMove(SanSocket& s, Result<size_t> r) {
  if (r.ok() || r.status().code() != proto::kMovedToTcp) return r;
  Status st = AdvanceMoved(s);
  return st.ok() ? r : Result<size_t>(st);
}

bool MovedOn(const Result<size_t>& r) { return !r.ok() && r.status().code() == proto::kMovedToTcp; }

ssize_t KernelRest(ssize_t total, ssize_t n) {
  if (n < 0) return total > 0 ? total : -1;
  return total + n;
}

int ConnectionErrno(SanSocket& s, int code, bool sending) {
  if (code == EPIPE) return EPIPE;
  if (s.error_reported.exchange(true)) return sending ? EPIPE : 0;
  // Broken after the peer's FIN (it closed, then its side went away): TCP's RST in CLOSE_WAIT,
  // which the kernel reports as EPIPE, never ECONNRESET (tcp_reset()); reading gives EOF.
  if (s.stream->GetReadiness().peer_closed) return sending ? EPIPE : 0;
  return code == ECONNRESET || code == EPROTO ? ECONNRESET : code;
}

ssize_t RecvFailed(SanSocket& s, size_t total, int code, bool read_shut) {
  if (total > 0) return static_cast<ssize_t>(total);
  if (code == EAGAIN && read_shut) return 0;
  if (code != EAGAIN && code != EINTR) code = ConnectionErrno(s, code, false);
  if (code == 0) return 0;
  errno = code;
  return -1;
}

}  // namespace san
