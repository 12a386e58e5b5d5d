#include "sanlib/common/raw_syscall.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace san {
namespace {

// Each case is made through san::Syscall and through libc's syscall(): the same result and errno
// (libc is the oracle).

TEST(RawSyscall, NoArgumentCallGivesTheKernelsAnswer) {
  EXPECT_EQ(Syscall(SYS_getpid), ::syscall(SYS_getpid));
  EXPECT_EQ(Syscall(SYS_getpid), static_cast<long>(getpid()));
}

TEST(RawSyscall, FailureIsMinusOneWithErrnoLikeLibc) {
  errno = 0;
  EXPECT_EQ(Syscall(SYS_close, -1), -1);
  EXPECT_EQ(errno, EBADF);
  errno = 0;
  EXPECT_EQ(::syscall(SYS_close, -1), -1);
  EXPECT_EQ(errno, EBADF);
  // A call the kernel does not have (ENOSYS, or what a seccomp filter answers instead): as libc.
  errno = 0;
  EXPECT_EQ(::syscall(100000), -1);
  const int libc_errno = errno;
  errno = 0;
  EXPECT_EQ(Syscall(100000), -1);
  EXPECT_EQ(errno, libc_errno);
}

TEST(RawSyscall, SuccessLeavesErrnoAlone) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  errno = 1234;
  EXPECT_EQ(Syscall(SYS_write, fds[1], "abc", size_t{3}), 3);
  EXPECT_EQ(errno, 1234);
  char got[4] = {};
  EXPECT_EQ(Syscall(SYS_read, fds[0], got, sizeof got), 3);
  EXPECT_STREQ(got, "abc");
  EXPECT_EQ(Syscall(SYS_close, fds[0]), 0);
  EXPECT_EQ(Syscall(SYS_close, fds[1]), 0);
}

TEST(RawSyscall, SixArgumentsReachTheKernel) {
  // sendto names its destination in the fifth and sixth, recvfrom returns the sender there.
  const int rx = socket(AF_INET, SOCK_DGRAM, 0);
  const int tx = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(rx, 0);
  ASSERT_GE(tx, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof at;
  ASSERT_EQ(bind(rx, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(getsockname(rx, reinterpret_cast<sockaddr*>(&at), &len), 0);
  const char msg[] = "six";
  EXPECT_EQ(Syscall(SYS_sendto, tx, msg, sizeof msg, 0, &at, socklen_t{sizeof at}),
            static_cast<long>(sizeof msg));
  char got[8] = {};
  sockaddr_in from{};
  socklen_t from_len = sizeof from;
  EXPECT_EQ(Syscall(SYS_recvfrom, rx, got, sizeof got, 0, &from, &from_len),
            static_cast<long>(sizeof msg));
  EXPECT_STREQ(got, "six");
  sockaddr_in sender{};
  len = sizeof sender;
  ASSERT_EQ(getsockname(tx, reinterpret_cast<sockaddr*>(&sender), &len), 0);
  EXPECT_EQ(from_len, sizeof from);
  EXPECT_EQ(from.sin_port, sender.sin_port);
  // A bad sixth argument is the kernel's EINVAL: a destination length too short.
  errno = 0;
  EXPECT_EQ(Syscall(SYS_sendto, tx, msg, sizeof msg, 0, &at, socklen_t{1}), -1);
  EXPECT_EQ(errno, EINVAL);
  // ppoll's fourth and fifth: the signal set (a bad pointer would be EFAULT) and its size,
  // checked once a set is given.
  pollfd p{rx, POLLIN, 0};
  timespec zero{0, 0};
  sigset_t none;
  sigemptyset(&none);
  errno = 0;
  EXPECT_EQ(Syscall(SYS_ppoll, &p, 1, &zero, &none, 1), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(Syscall(SYS_ppoll, &p, 1, &zero, &none, _NSIG / 8), 0);
  close(rx);
  close(tx);
}

TEST(RawSyscall, LargeResultsAreResults) {
  // A result past 32 bits (lseek to 2^40 in a sparse file) comes back whole, not truncated to
  // an int nor taken for an error.
  char path[] = "/tmp/raw_syscall_testXXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  const long far = 1L << 40;
  const long got = Syscall(SYS_lseek, fd, far, SEEK_SET);
  if (got == -1) {
    EXPECT_EQ(errno, EINVAL);  // a file system without such large files: libc says the same
    EXPECT_EQ(::syscall(SYS_lseek, fd, far, SEEK_SET), -1);
  } else {
    EXPECT_EQ(got, far);
  }
  close(fd);
}

}  // namespace
}  // namespace san
