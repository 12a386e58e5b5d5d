// Socket options, fcntl and ioctl on SAN sockets.
//
// Every option is applied to the kernel socket underneath too (it is the socket's identity:
// getsockopt must read back what was set, and a connection that falls back to TCP keeps it).
// Those that mean something to the SAN path act on it as well: TCP_NODELAY turns combining off,
// O_NONBLOCK makes the data calls nonblocking, SO_ERROR reports the SAN connection's error.
// SO_RCVBUF/SO_SNDBUF and SO_KEEPALIVE stay kernel-only: the SAN window is fixed at set-up
// (SAN_WINDOW), and keepalive on the kernel socket is what detects a dead peer host. FIONREAD
// counts the bytes a read would return (SAN's queue, or a late move's TCP bytes), FIONBIO acts
// as O_NONBLOCK does.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <cstring>

#include "san/san.h"
#include "sanlib/common/kernel.h"
#include "sanlib/socket/late_upgrade.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

namespace san {
namespace {

SanSocket* ShmSocketOf(int fd) {
  SanSocket* s = Runtime::Get().table().Find(fd);
  return s && s->mode.load(std::memory_order_acquire) == SocketMode::kShm ? s : nullptr;
}

// The pending error of a SAN connection, cleared by reading it (as sk_err is).
int TakeSanError(SanSocket& s) {
  if (s.connecting.load(std::memory_order_acquire)) SocketRevents(s, POLLOUT);
  if (int err = s.connect_error.exchange(0)) {
    s.error_reported.store(true);
    return err;
  }
  const proto::Readiness r = s.stream->GetReadiness();
  if (r.error == 0 || s.error_reported.exchange(true)) return 0;
  // Broken after the peer's FIN: TCP's RST in CLOSE_WAIT, which the kernel reports as EPIPE.
  if (r.peer_closed) return EPIPE;
  return r.error == EPROTO ? ECONNRESET : r.error;
}

}  // namespace

int GetSockOpt(int fd, int level, int name, void* value, socklen_t* len) {
  SanSocket* s = ShmSocketOf(fd);
  if (s && level == SOL_SOCKET && name == SO_ERROR && value && len && *len >= sizeof(int)) {
    int err = TakeSanError(*s);
    if (err == 0) return kernel::getsockopt(fd, level, name, value, len);
    memcpy(value, &err, sizeof err);
    *len = sizeof err;
    return 0;
  }
  return kernel::getsockopt(fd, level, name, value, len);
}

int SetSockOpt(int fd, int level, int name, const void* value, socklen_t len) {
  if (kernel::setsockopt(fd, level, name, value, len) != 0) return -1;
  SanSocket* s = Runtime::Get().table().Find(fd);
  if (s && level == IPPROTO_TCP && name == TCP_NODELAY && value && len >= sizeof(int)) {
    int on;
    memcpy(&on, value, sizeof on);
    s->nodelay_requested = on != 0;
    if (s->mode.load(std::memory_order_acquire) == SocketMode::kShm) s->stream->SetNoDelay(on != 0);
  }
  return 0;
}

int Fcntl(int fd, int cmd, long arg) {
  const int rc = kernel::fcntl(fd, cmd, arg);
  if (rc == 0 && cmd == F_SETFL) {
    if (SanSocket* s = Runtime::Get().table().Find(fd)) s->nonblocking.store(arg & O_NONBLOCK);
  }
  return rc;
}

int Ioctl(int fd, unsigned long request, void* arg) {
  SanSocket* s = Runtime::Get().table().Find(fd);
  if (!s || (request != FIONREAD && request != FIONBIO)) return kernel::ioctl(fd, request, arg);
  if (!arg) {
    errno = EFAULT;
    return -1;
  }
  if (request == FIONBIO) {
    // The kernel socket's flag too: F_GETFL reads it, and a connection not settled yet (or TCP)
    // keeps it for how its later SAN calls block.
    const int rc = kernel::ioctl(fd, request, arg);
    if (rc == 0) s->nonblocking.store(*static_cast<int*>(arg) != 0);
    return rc;
  }
  size_t n = 0;
  const SocketMode mode = s->mode.load(std::memory_order_acquire);
  if (s->late && SanlibCarries(*s) && (mode == SocketMode::kTcp || InflowPending(*s))) {
    // A kernel-TCP connection that may still move to shm, or one whose peer's TCP bytes are still
    // being read (late_upgrade.h): its wake byte is not data.
    n = LateReadable(*s);
  } else if (mode == SocketMode::kShm) {
    n = s->stream->Available();
  } else {
    return kernel::ioctl(fd, request, arg);
  }
  *static_cast<int*>(arg) = n > INT32_MAX ? INT32_MAX : static_cast<int>(n);
  return 0;
}

int GetInfo(int fd, san_info* info) {
  if (!info) {
    errno = EFAULT;
    return -1;
  }
  SanSocket* s = Runtime::Get().table().Find(fd);
  if (!s) {
    errno = kernel::fcntl(fd, F_GETFD, 0) < 0 ? EBADF : ENOTSOCK;
    return -1;
  }
  *info = san_info{};
  switch (s->mode.load(std::memory_order_acquire)) {
    case SocketMode::kShm: {
      info->mode = s->stream->endpoint().provider_kind() == fabric::ProviderKind::kVerbs
                       ? SAN_MODE_VERBS
                       : SAN_MODE_SHM;
      const proto::StreamStats st = s->stream->Stats();
      info->bytes_sent = st.bytes_sent;
      info->bytes_received = st.bytes_received;
      info->window = st.credits;
      info->mtu = st.mtu;
      break;
    }
    case SocketMode::kTcp: {
      info->mode = SAN_MODE_TCP;
      // A copy, not snprintf: programs that check every connection's mode call this per
      // connection (conn-bench does), and the formatting was a visible part of it.
      const std::string& why = FallbackReason(*s);
      std::memcpy(info->fallback, why.data(), std::min(why.size(), sizeof info->fallback - 1));
      break;
    }
    case SocketMode::kUnconnected:
      info->mode = SAN_MODE_NONE;
      break;
  }
  return 0;
}

}  // namespace san
