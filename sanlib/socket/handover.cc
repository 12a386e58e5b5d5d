#include "sanlib/socket/handover.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <vector>

#include "sanlib/common/clock.h"
#include "sanlib/common/control_name.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/scm_rights.h"
#include "sanlib/socket/control_service.h"
#include "sanlib/socket/image_shape.h"

namespace san {
namespace {

constexpr uint32_t kMagic = 0x484e4153;  // "SANH"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxFds = 8;
constexpr size_t kMaxState = 1u << 20;
constexpr int kTimeoutMs = 2000;

struct HandoverHeader {
  uint32_t magic;
  uint32_t version;
  int32_t status;
  uint32_t num_fds;
  ImageShape shape;
};

Status WaitFor(int fd, short events, uint64_t deadline_ns) {
  const uint64_t now = NowNs();
  if (now >= deadline_ns) return Status(ETIMEDOUT, "handover");
  pollfd p{fd, events, 0};
  const int rc = kernel::poll(&p, 1, static_cast<int>((deadline_ns - now) / 1000000) + 1);
  if (rc < 0 && errno != EINTR) return Status::FromErrno("poll(handover)");
  return Status::Ok();
}

// Sends all of iov; the fds go with the first bytes.
Status SendAll(int sock, std::vector<iovec> iov, const std::vector<int>& fds) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  bool fds_sent = fds.empty();
  size_t first = 0;
  while (first < iov.size()) {
    msghdr mh{};
    mh.msg_iov = iov.data() + first;
    mh.msg_iovlen = iov.size() - first;
    if (!fds_sent) PackRights(fds.data(), fds.size(), control, &mh);
    ssize_t n = kernel::sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("sendmsg(handover)");
    }
    fds_sent = true;
    while (first < iov.size() && static_cast<size_t>(n) >= iov[first].iov_len) {
      n -= static_cast<ssize_t>(iov[first++].iov_len);
    }
    if (first < iov.size()) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + n;
      iov[first].iov_len -= static_cast<size_t>(n);
    }
  }
  return Status::Ok();
}

}  // namespace

Status ReceiveExactly(int sock, void* out, size_t len, std::vector<UniqueFd>* fds,
                      uint64_t deadline_ns) {
  auto* p = static_cast<char*>(out);
  while (len > 0) {
    iovec iov{p, len};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    const ssize_t n = kernel::recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n > 0) TakeRights(mh, fds);  // owned (and closed) whatever happens next
    if (n > 0) {
      if (mh.msg_flags & MSG_CTRUNC) return Status(EPROTO, "handover: too many fds");
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      return Status(ECONNRESET, "handover: owner closed");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (Status st = WaitFor(sock, POLLIN, deadline_ns); !st.ok()) return st;
    } else {
      return Status::FromErrno("recvmsg(handover)");
    }
  }
  return Status::Ok();
}

Status SendHandover(int sock, proto::Stream* stream, int error) {
  HandoverHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  proto::StreamImage image;
  if (stream) {
    Status st = stream->Export(&image);
    if (!st.ok()) {
      error = st.code();
      stream = nullptr;
    }
  }
  if (!stream) {
    h.status = error;
    return SendAll(sock, {iovec{&h, sizeof h}}, {});
  }
  std::vector<int> fds;
  for (const UniqueFd& fd : image.endpoint.fds) fds.push_back(fd.get());
  h.num_fds = static_cast<uint32_t>(fds.size());
  h.shape = ShapeOf(image);
  if (fds.size() > kMaxFds) return Status(EINVAL, "handover: too many fds");
  return SendAll(
      sock,
      {iovec{&h, sizeof h}, iovec{image.endpoint.state.data(), image.endpoint.state.size()},
       iovec{image.state.data(), image.state.size()}},
      fds);
}

Result<std::unique_ptr<proto::Stream>> ClaimFromOwner(int owner_pid, const proto::FourTuple& tuple,
                                                      int conn_fd, fabric::Provider& provider) {
  const uint64_t deadline = NowNs() + uint64_t{kTimeoutMs} * 1000000;
  UniqueFd sock(kernel::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return Status::FromErrno("socket(handover)");
  sockaddr_un sun;
  const socklen_t len = ControlSocketName(owner_pid, &sun);
  if (kernel::connect(sock.get(), reinterpret_cast<sockaddr*>(&sun), len) != 0) {
    return Status::FromErrno("connect(owner control socket)");
  }
  // Only the owner itself, of our user or root, may hand us a channel.
  ucred cred{};
  socklen_t clen = sizeof cred;
  if (kernel::getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
      cred.pid != owner_pid || (cred.uid != geteuid() && cred.uid != 0)) {
    return Status(EPERM, "handover: the control socket is not the listener's owner");
  }
  const fabric::ConnectData request = proto::EncodeConnectRequest(tuple);
  char head[2] = {ControlService::kClaim, static_cast<char>(request.length)};
  if (Status st = SendAll(
          sock.get(), {iovec{head, 2}, iovec{const_cast<uint8_t*>(request.bytes), request.length}},
          {conn_fd});
      !st.ok()) {
    return st;
  }
  HandoverHeader h;
  std::vector<UniqueFd> fds;
  if (Status st = ReceiveExactly(sock.get(), &h, sizeof h, &fds, deadline); !st.ok()) return st;
  if (h.magic != kMagic || h.version != kVersion) return Status(EPROTO, "handover: header");
  if (h.status != 0) return Status(h.status, "handover: owner");
  proto::StreamImage image;
  if (h.num_fds > kMaxFds || !ApplyShape(h.shape, kMaxState, &image).ok()) {
    return Status(EPROTO, "handover: sizes");
  }
  if (Status st = ReceiveExactly(sock.get(), image.endpoint.state.data(),
                                 image.endpoint.state.size(), &fds, deadline);
      !st.ok()) {
    return st;
  }
  if (Status st =
          ReceiveExactly(sock.get(), image.state.data(), image.state.size(), &fds, deadline);
      !st.ok()) {
    return st;
  }
  if (fds.size() != h.num_fds) return Status(EPROTO, "handover: fd count");
  image.endpoint.fds = std::move(fds);
  return proto::Stream::Import(provider, std::move(image));
}

}  // namespace san
