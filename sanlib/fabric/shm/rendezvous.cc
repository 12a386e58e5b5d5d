#include "sanlib/fabric/shm/rendezvous.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "sanlib/fabric/address.h"

#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/scm_rights.h"

namespace san::fabric::shm {
namespace {

constexpr char kNamePrefix[] = "sanlib/shm/";

}  // namespace

void RendezvousAddress(const std::string& key, sockaddr_storage* addr, socklen_t* len) {
  sockaddr_un sun;
  std::memset(&sun, 0, sizeof(sun));
  sun.sun_family = AF_UNIX;
  std::string name = std::string(kNamePrefix) + key;
  // sun_path[0] stays '\0' (abstract namespace); keys are at most ~60 bytes, the path holds 107.
  size_t n = std::min(name.size(), sizeof(sun.sun_path) - 1);
  std::memcpy(sun.sun_path + 1, name.data(), n);
  std::memset(addr, 0, sizeof(*addr));
  std::memcpy(addr, &sun, sizeof(sun));
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

Result<UniqueFd> ListenRendezvous(const std::string& key) {
  UniqueFd sock(
      PlaceHigh(kernel::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)));
  if (!sock.valid()) return Status::FromErrno("socket(AF_UNIX)");
  sockaddr_storage addr;
  socklen_t len;
  RendezvousAddress(key, &addr, &len);
  if (kernel::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return Status::FromErrno("bind(shm rendezvous)");
  }
  if (kernel::listen(sock.get(), SOMAXCONN) != 0)
    return Status::FromErrno("listen(shm rendezvous)");
  return sock;
}

Result<UniqueFd> ConnectRendezvous(const sockaddr* server, socklen_t server_len) {
  std::vector<std::string> keys;
  Status s = ConnectKeys(server, server_len, &keys);
  if (!s.ok()) return s;
  for (const std::string& key : keys) {
    UniqueFd sock(PlaceHigh(kernel::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)));
    if (!sock.valid()) return Status::FromErrno("socket(AF_UNIX)");
    // A full backlog makes connect() wait; bound it (AF_UNIX connect honours SO_SNDTIMEO).
    timeval tv{kConnectTimeoutMs / 1000, 0};
    kernel::setsockopt(sock.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_storage addr;
    socklen_t len;
    RendezvousAddress(key, &addr, &len);
    int rc;
    do {
      rc = kernel::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), len);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) return sock;
    if (errno == EAGAIN) return Status(ETIMEDOUT, "connect(shm rendezvous)");
    if (errno != ECONNREFUSED && errno != ENOENT)
      return Status::FromErrno("connect(shm rendezvous)");
  }
  return Status(ECONNREFUSED, "connect(shm rendezvous)");
}

Status SendMessage(int sock, const void* msg, size_t len, const int* fds, int num_fds) {
  iovec iov{const_cast<void*>(msg), len};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxRequestFds)] = {};
  if (num_fds > kMaxRequestFds) return Status(EINVAL, "SendMessage: too many fds");
  PackRights(fds, static_cast<size_t>(num_fds), control, &mh);
  ssize_t n;
  do {
    // The kernel's call: under the compatibility layer sendmsg is interposed, and its SCM_RIGHTS
    // handling (socket/fd_passing.h) must not take the fds we pass for the set-up (a proof fd is a
    // SAN socket) for an application's.
    n = kernel::sendmsg(sock, &mh, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::FromErrno("sendmsg(shm rendezvous)");
  if (static_cast<size_t>(n) != len) return Status(EPROTO, "sendmsg(shm rendezvous): short");
  return Status::Ok();
}

Status ReceiveMessage(int sock, void* msg, size_t len, UniqueFd* fds, int num_fds, bool may_add_one,
                      int* received_count) {
  // One byte more than expected so an oversized message shows up as MSG_TRUNC or a longer count.
  alignas(8) char buffer[sizeof(RequestMessage) + 1];
  if (len >= sizeof(buffer)) return Status(EINVAL, "ReceiveMessage: size");
  iovec iov{buffer, len + 1};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  // Room for more fds than we want, so extras are received (and closed) rather than lost in limbo.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)] = {};
  mh.msg_control = control;
  mh.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = kernel::recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN ? Status(EAGAIN, "recvmsg") : Status::FromErrno("recvmsg");
  if (n == 0) return Status(ECONNRESET, "recvmsg(shm rendezvous): peer closed");

  // Take ownership of every fd first, whatever else is wrong with the message.
  std::vector<UniqueFd> received;
  TakeRights(mh, &received);
  const size_t want = static_cast<size_t>(num_fds);
  if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || static_cast<size_t>(n) != len ||
      (received.size() != want && !(may_add_one && received.size() == want + 1))) {
    return Status(EPROTO, "recvmsg(shm rendezvous): malformed message");
  }
  std::memcpy(msg, buffer, len);
  for (size_t i = 0; i < received.size(); ++i) fds[i] = std::move(received[i]);
  if (received_count) *received_count = static_cast<int>(received.size());
  return Status::Ok();
}

Status CheckPeerCredentials(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (kernel::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::FromErrno("getsockopt(SO_PEERCRED)");
  }
  if (cred.uid != geteuid()) return Status(EPERM, "shm rendezvous: peer uid differs");
  return Status::Ok();
}

int32_t PeerPid(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (kernel::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid > 0 ? cred.pid : 0;
}

namespace {

// Whether fd's file is the kernel's anonymous inode, which every eventfd shares (with epoll,
// timerfd, signalfd...): never a file, pipe or socket of the sender's choosing.
bool OnAnonInode(int fd) {
  static const struct stat anon = [] {
    struct stat st {};
    const int e = eventfd(0, EFD_CLOEXEC);
    if (e >= 0) {
      fstat(e, &st);
      kernel::close(e);
    }
    return st;
  }();
  struct stat st {};
  return anon.st_ino != 0 && fstat(fd, &st) == 0 && st.st_dev == anon.st_dev &&
         st.st_ino == anon.st_ino;
}

}  // namespace

Status CheckEventFd(int fd) {
  // /proc names the kind exactly; a process without /proc (a chrooted FTP session) checks that
  // the fd is at least on the anonymous inode.
  char path[64];
  char target[64] = {};
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(path, target, sizeof(target) - 1);
  const bool is_eventfd = n >= 0 ? std::strcmp(target, "anon_inode:[eventfd]") == 0
                                 : errno == ENOENT && OnAnonInode(fd);
  if (!is_eventfd) return Status(EPROTO, "shm rendezvous: doorbell is not an eventfd");
  int flags = kernel::fcntl(fd, F_GETFL);
  if (flags < 0 || kernel::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return Status::FromErrno("fcntl");
  return Status::Ok();
}

}  // namespace san::fabric::shm
