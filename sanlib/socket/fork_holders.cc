#include "sanlib/socket/fork_holders.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sanlib/common/fd_placement.h"
#include "sanlib/common/log.h"
#include "sanlib/common/raw_syscall.h"
#include "sanlib/socket/socket_ops.h"

namespace san {

bool OthersHold(SanSocket& s) {
  if (!s.holders_write.valid()) return s.holders_lost;  // no fork shared it, or unknown
  const int w = s.holders_write.get();
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", w);
  if (access(path, F_OK) != 0) return true;  // no /proc: our read end could not come back
  s.holders_read.reset();
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  const char probe = 0;
  const ssize_t n = Syscall(SYS_write, w, &probe, 1);
  const bool others = !(n < 0 && errno == EPIPE);
  if (!others && !was_pending) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_only, nullptr, &zero);  // the EPIPE's SIGPIPE, directed at this thread
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  const int r = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (r < 0) {
    SAN_LOG_WARN("fd %d: fork-holder pipe not reopened (%s); holders are counted instead",
                 s.fd.load(), strerror(errno));
    return true;
  }
  s.holders_read.reset(PlaceHigh(r));  // beside the write end (MakeHoldersPipe)
  char drain[256];
  while (Syscall(SYS_read, s.holders_read.get(), drain, sizeof drain) > 0) {
  }
  return others;
}

bool MayHandOn(const SanSocket& s) {
  return s.sleepers.load(std::memory_order_acquire) == 0 && !s.holders_lost &&
         s.holders_read.valid() == s.holders_write.valid();
}

void HoldAcrossFork(SanSocket* s) {
  if (s->stream && !s->fork_shared.load(std::memory_order_relaxed)) {
    s->fork_shared.store(true, std::memory_order_relaxed);  // no write when set: fork's COW pages
  }
  if (!s->stream || s->holders_write.valid() || s->holders_lost) return;
  if (!MakeHoldersPipe(*s)) {
    SAN_LOG_WARN("fd %d: no fork-holder pipe at fork (%s); its holders are counted instead",
                 s->fd.load(), strerror(errno));
  }
}

bool PeerIsOurs(SocketTable& table, SanSocket& s) {
  Result<sockaddr_storage> local = LocalAddress(s.fd);
  Result<sockaddr_storage> peer = PeerAddress(s.fd);
  if (!local.ok() || !peer.ok()) return false;
  bool ours = false;
  table.ForEach([&](SanSocket* other) {
    if (ours || other == &s) return;
    Result<sockaddr_storage> olocal = LocalAddress(other->fd);
    Result<sockaddr_storage> opeer = PeerAddress(other->fd);
    ours = olocal.ok() && opeer.ok() && proto::SameAddress(olocal.value(), peer.value()) &&
           proto::SameAddress(opeer.value(), local.value());
  });
  return ours;
}

}  // namespace san
