// errno across the interposed calls (compat/errno_keeper.h): a call that succeeds leaves errno as
// it was, on a SAN connection exactly as on a kernel one (the oracle: the same sweep runs on a
// kernel pair). One case is gRPC 1.51's own sequence: a nonblocking connect() that returns
// EINPROGRESS, then epoll_ctl(ADD) of that socket, then errno read as the connect's outcome (it
// used to be ENOENT on SAN sockets, from a probe inside epoll_ctl, and gRPC failed the connect).
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>

#include "compat/pair.h"

namespace san::testing_support {
namespace {

constexpr int kSentinel = 4242;  // no errno value: only a call that changes errno changes it

class ErrnoTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { MakePair(GetParam(), &pair_); }

  // Runs `call`, which must succeed, with errno preset; errno must come back untouched.
  void Kept(const char* what, const std::function<long()>& call) {
    errno = kSentinel;
    const long rc = call();
    const int after = errno;
    EXPECT_GE(rc, 0) << what << ": " << strerror(after);
    EXPECT_EQ(after, kSentinel) << what << " succeeded (" << rc << ") and set errno to "
                                << strerror(after);
  }

  TcpPair pair_;
};

TEST_P(ErrnoTest, DataCallsThatSucceedLeaveErrnoAlone) {
  const int c = pair_.client, s = pair_.server;
  char buf[64] = "0123456789";
  char in[64];
  iovec iov{buf, 4};
  iovec iov_in{in, sizeof in};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  msghdr m_in{};
  m_in.msg_iov = &iov_in;
  m_in.msg_iovlen = 1;
  Kept("write", [&] { return write(c, buf, 4); });
  Kept("read", [&] { return read(s, in, 4); });
  Kept("send", [&] { return send(c, buf, 4, 0); });
  Kept("recv", [&] { return recv(s, in, 4, 0); });
  Kept("sendto", [&] { return sendto(c, buf, 4, 0, nullptr, 0); });
  Kept("recvfrom", [&] { return recvfrom(s, in, 4, 0, nullptr, nullptr); });
  Kept("sendmsg", [&] { return sendmsg(c, &m, 0); });
  Kept("recvmsg", [&] { return recvmsg(s, &m_in, 0); });
  Kept("writev", [&] { return writev(c, &iov, 1); });
  Kept("readv", [&] { return readv(s, &iov_in, 1); });
  mmsghdr mm{};
  mm.msg_hdr = m;
  mmsghdr mm_in{};
  mm_in.msg_hdr = m_in;
  Kept("sendmmsg", [&] { return sendmmsg(c, &mm, 1, 0); });
  Kept("recvmmsg", [&] { return recvmmsg(s, &mm_in, 1, 0, nullptr); });
  // A successful nonblocking read of nothing is not a success (EAGAIN): not part of the sweep.
  FILE* f = tmpfile();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fwrite(buf, 1, 10, f), 10u);
  fflush(f);
  off_t off = 0;
  Kept("sendfile", [&] { return sendfile(c, fileno(f), &off, 10); });
  fclose(f);
  Kept("recv (the file)", [&] { return recv(s, in, 10, MSG_WAITALL); });
}

TEST_P(ErrnoTest, ControlCallsThatSucceedLeaveErrnoAlone) {
  const int c = pair_.client, s = pair_.server;
  int one = 1, value = 0;
  socklen_t len = sizeof value;
  Kept("setsockopt", [&] { return setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); });
  Kept("getsockopt", [&] { return getsockopt(c, SOL_SOCKET, SO_ERROR, &value, &len); });
  Kept("fcntl(F_GETFL)", [&] { return fcntl(c, F_GETFL); });
  Kept("fcntl(F_SETFL)", [&] { return fcntl(c, F_SETFL, O_NONBLOCK); });
  Kept("ioctl(FIONBIO)", [&] {
    int off = 0;
    return ioctl(c, FIONBIO, &off);
  });
  Kept("ioctl(FIONREAD)", [&] { return ioctl(s, FIONREAD, &value); });
  pollfd p{s, POLLIN, 0};
  Kept("poll", [&] { return poll(&p, 1, 0); });
  timespec zero{0, 0};
  Kept("ppoll", [&] { return ppoll(&p, 1, &zero, nullptr); });
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(s, &rd);
  timeval tv{0, 0};
  Kept("select", [&] { return select(s + 1, &rd, nullptr, nullptr, &tv); });
  FD_SET(s, &rd);
  Kept("pselect", [&] { return pselect(s + 1, &rd, nullptr, nullptr, &zero, nullptr); });
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_event got[4];
  Kept("epoll_ctl(ADD)", [&] { return epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev); });
  Kept("epoll_ctl(MOD)", [&] { return epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev); });
  Kept("epoll_wait", [&] { return epoll_wait(ep, got, 4, 0); });
  Kept("epoll_pwait", [&] { return epoll_pwait(ep, got, 4, 0, nullptr); });
  Kept("epoll_ctl(DEL)", [&] { return epoll_ctl(ep, EPOLL_CTL_DEL, s, &ev); });
  close(ep);
  int copy = -1;
  Kept("dup", [&] { return copy = dup(c); });
  Kept("dup2", [&] { return dup2(c, copy); });
  Kept("dup3", [&] { return dup3(c, copy, O_CLOEXEC); });
  Kept("close (a duplicate)", [&] { return close(copy); });
  Kept("shutdown", [&] { return shutdown(c, SHUT_WR); });
  Kept("close", [&] {
    const int rc = close(pair_.client);
    pair_.client = -1;
    return rc;
  });
}

// gRPC's connect: the outcome of a nonblocking connect is read from errno after registering the
// socket with epoll.
TEST_P(ErrnoTest, NonblockingConnectThenEpollCtlKeepsEinprogress) {
  const int listener = LoopbackListener(GetParam());
  ASSERT_GE(listener, 0);
  const int fd = StreamSocket(GetParam());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
  const sockaddr_in a = Loopback(PortOf(listener));
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  const int connect_errno = rc == 0 ? 0 : errno;
  ASSERT_TRUE(rc == 0 || connect_errno == EINPROGRESS) << strerror(connect_errno);
  epoll_event ev{};
  ev.events = EPOLLOUT | EPOLLIN | EPOLLET;
  errno = connect_errno;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  EXPECT_EQ(errno, connect_errno) << "epoll_ctl succeeded and changed errno to " << strerror(errno);
  // The connection completes as on the kernel: writable, SO_ERROR 0.
  epoll_event out{};
  ASSERT_EQ(epoll_wait(ep, &out, 1, 5000), 1);
  EXPECT_TRUE(out.events & EPOLLOUT);
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0);
  const int server = accept(listener, nullptr, nullptr);
  EXPECT_GE(server, 0);
  close(server);
  close(fd);
  close(ep);
  close(listener);
}

INSTANTIATE_TEST_SUITE_P(SanAndKernel, ErrnoTest, ::testing::Bool(), Name);

}  // namespace
}  // namespace san::testing_support
