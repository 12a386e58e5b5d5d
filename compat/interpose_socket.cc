// Interposed connection calls: socket, listen, accept, accept4, connect, shutdown, close,
// getsockopt, setsockopt. Sockets the policy admits are made and managed by sanlib; everything
// else goes to libc unchanged.
#include <errno.h>

#include "compat/errno_keeper.h"
#include "compat/managed.h"
#include "compat/policy.h"
#include "compat/real_calls.h"
#include "sanlib/common/kernel.h"
#include "sanlib/socket/rendezvous_owner.h"
#include "sanlib/socket/socket_ops.h"

using san::compat::KeepErrno;
using san::compat::Managed;
using san::compat::Policy;
using san::compat::Real;

extern "C" {

int socket(int domain, int type, int protocol) {
  return KeepErrno([&]() -> int {
    if (!Policy::Get().AdmitSocket(domain, type, protocol)) {
      return Real().socket(domain, type, protocol);
    }
    return san::SocketCreate(domain, type, protocol);
  });
}

int listen(int fd, int backlog) {
  return KeepErrno([&]() -> int {
    san::SanSocket* s = Managed(fd);
    if (!s) return Real().listen(fd, backlog);
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (!s->listening.load() &&
        san::kernel::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        !Policy::Get().AdmitAddress(reinterpret_cast<sockaddr*>(&local), len)) {
      san::Release(fd);  // a rule says this port stays plain: sanlib lets go of it
      return Real().listen(fd, backlog);
    }
    return san::Listen(fd, backlog);
  });
}

namespace {

// A listening socket sanlib did not see made (inherited over exec, received over SCM_RIGHTS,
// systemd's LISTEN_FDS): adopted at its first accept if the policy admits it, so that clients'
// channels are found and its connections may move to shm.
bool AdoptedListener(int fd) {
  if (!Policy::Get().AdmitSocket(AF_INET, SOCK_STREAM, 0)) return false;
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (san::kernel::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      (local.ss_family != AF_INET && local.ss_family != AF_INET6) ||
      !Policy::Get().AdmitAddress(reinterpret_cast<sockaddr*>(&local), len)) {
    return false;
  }
  return san::AdoptListener(fd) != nullptr;
}

}  // namespace

int accept(int fd, sockaddr* addr, socklen_t* len) {
  return KeepErrno([&]() -> int {
    if (!Managed(fd) && !AdoptedListener(fd)) return Real().accept(fd, addr, len);
    return san::Accept(fd, addr, len, 0);
  });
}

int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return KeepErrno([&]() -> int {
    if (!Managed(fd) && !AdoptedListener(fd)) return Real().accept4(fd, addr, len, flags);
    return san::Accept(fd, addr, len, flags);
  });
}

int connect(int fd, const sockaddr* addr, socklen_t len) {
  return KeepErrno([&]() -> int {
    san::SanSocket* s = Managed(fd);
    if (!s) return Real().connect(fd, addr, len);
    if (s->mode.load() == san::SocketMode::kUnconnected && !s->listening.load() && addr &&
        !Policy::Get().AdmitAddress(addr, len)) {
      san::Release(fd);
      return Real().connect(fd, addr, len);
    }
    return san::Connect(fd, addr, len);
  });
}

int shutdown(int fd, int how) {
  return KeepErrno([&]() -> int {
    if (!Managed(fd)) return Real().shutdown(fd, how);
    return san::Shutdown(fd, how);
  });
}

int close(int fd) {
  return KeepErrno([&]() -> int {
    if (Managed(fd)) return san::Close(fd);
    if (san::VforkChildKeeps(fd)) return 0;
    san::EpollClosed(fd);
    return Real().close(fd);
  });
}

int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  return KeepErrno([&]() -> int {
    if (!Managed(fd)) return Real().getsockopt(fd, level, name, value, len);
    return san::GetSockOpt(fd, level, name, value, len);
  });
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  return KeepErrno([&]() -> int {
    if (!Managed(fd)) return Real().setsockopt(fd, level, name, value, len);
    return san::SetSockOpt(fd, level, name, value, len);
  });
}

}  // extern "C"
