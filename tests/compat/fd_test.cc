// fd-life and stdio calls on SAN sockets, each case run on a SAN pair and on a kernel pair (the
// oracle, pair.h): dup/dup2/F_DUPFD, FIONREAD/FIONBIO, O_NONBLOCK, readv/writev, sendmsg/recvmsg/
// recvfrom, sendfile, fdopen (SOVIA Figure 3), select/pselect/poll mixed with kernel fds.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compat/pair.h"

namespace san::testing_support {
namespace {

class FdTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { MakePair(GetParam(), &pair_); }

  // Reads exactly n bytes (blocking).
  std::string ReadN(int fd, size_t n) {
    std::string got(n, '\0');
    size_t done = 0;
    while (done < n) {
      const ssize_t r = read(fd, &got[done], n - done);
      if (r <= 0) break;
      done += static_cast<size_t>(r);
    }
    got.resize(done);
    return got;
  }

  TcpPair pair_;
};

TEST_P(FdTest, DuplicateKeepsTheConnectionAfterTheOriginalCloses) {
  const int copy = dup(pair_.client);
  ASSERT_GE(copy, 0);
  ASSERT_EQ(close(pair_.client), 0);
  pair_.client = -1;
  ASSERT_EQ(write(copy, "via dup", 7), 7);
  EXPECT_EQ(ReadN(pair_.server, 7), "via dup");
  ASSERT_EQ(write(pair_.server, "back", 4), 4);
  EXPECT_EQ(ReadN(copy, 4), "back");
  if (GetParam()) {
    san_info info{};
    ASSERT_EQ(san_getinfo(copy, &info), 0);
    EXPECT_EQ(info.mode, SAN_MODE_SHM);
  }
  close(copy);
  char c;
  EXPECT_EQ(read(pair_.server, &c, 1), 0) << "last fd closed: the peer sees EOF";
}

TEST_P(FdTest, FcntlDupfdAndDup3) {
  const int copy = fcntl(pair_.client, F_DUPFD_CLOEXEC, 100);
  ASSERT_GE(copy, 100);
  EXPECT_EQ(fcntl(copy, F_GETFD), FD_CLOEXEC);
  const int target = dup(0);  // some unrelated fd to replace
  ASSERT_GE(target, 0);
  ASSERT_EQ(dup3(copy, target, O_CLOEXEC), target);
  close(copy);
  ASSERT_EQ(write(target, "3", 1), 1);
  EXPECT_EQ(ReadN(pair_.server, 1), "3");
  close(target);
  EXPECT_EQ(dup3(pair_.client, pair_.client, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(dup2(987654, pair_.client), -1);
  EXPECT_EQ(errno, EBADF);
  ASSERT_EQ(write(pair_.client, "still", 5), 5) << "a failed dup2 leaves its target alone";
  EXPECT_EQ(ReadN(pair_.server, 5), "still");
}

TEST_P(FdTest, Dup2OverAConnectionClosesIt) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  ASSERT_EQ(dup2(pipefd[0], pair_.client), pair_.client);
  char c;
  EXPECT_EQ(read(pair_.server, &c, 1), 0) << "the replaced connection is closed: EOF";
  ASSERT_EQ(write(pipefd[1], "p", 1), 1);
  EXPECT_EQ(read(pair_.client, &c, 1), 1) << "the number is now the pipe";
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST_P(FdTest, IoctlFionreadAndFionbio) {
  ASSERT_EQ(write(pair_.client, "0123456789", 10), 10);
  int avail = -1;
  for (int i = 0; i < 1000 && avail != 10; ++i) {
    ASSERT_EQ(ioctl(pair_.server, FIONREAD, &avail), 0);
    if (avail != 10) usleep(1000);
  }
  EXPECT_EQ(avail, 10);
  EXPECT_EQ(ReadN(pair_.server, 10), "0123456789");
  int on = 1;
  ASSERT_EQ(ioctl(pair_.server, FIONBIO, &on), 0);
  EXPECT_TRUE(fcntl(pair_.server, F_GETFL) & O_NONBLOCK);
  char c;
  EXPECT_EQ(read(pair_.server, &c, 1), -1);
  EXPECT_EQ(errno, EAGAIN);
  on = 0;
  ASSERT_EQ(ioctl(pair_.server, FIONBIO, &on), 0);
  ASSERT_EQ(fcntl(pair_.server, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(recv(pair_.server, &c, 1, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_P(FdTest, VectorAndMessageCalls) {
  char a[] = "ab", b[] = "cde";
  iovec out[2] = {{a, 2}, {b, 3}};
  ASSERT_EQ(writev(pair_.client, out, 2), 5);
  char x[1], y[4];
  iovec in[2] = {{x, 1}, {y, 4}};
  ssize_t got = 0;
  for (int i = 0; i < 1000 && got < 5; ++i) {
    const ssize_t n = readv(pair_.server, in, 2);
    ASSERT_GT(n, 0);
    got += n;
    in[0].iov_len = 0;  // a second read only fills what is left (not needed on the fast path)
  }
  EXPECT_EQ(std::string(x, 1) + std::string(y, 4), "abcde");
  msghdr msg{};
  char text[] = "msg";
  iovec one{text, 3};
  msg.msg_iov = &one;
  msg.msg_iovlen = 1;
  ASSERT_EQ(sendmsg(pair_.client, &msg, 0), 3);
  char buf[8];
  sockaddr_storage from{};
  iovec into{buf, sizeof buf};
  msghdr rmsg{};
  rmsg.msg_name = &from;
  rmsg.msg_namelen = sizeof from;
  rmsg.msg_iov = &into;
  rmsg.msg_iovlen = 1;
  char control[64];
  rmsg.msg_control = control;
  rmsg.msg_controllen = sizeof control;
  ASSERT_EQ(recvmsg(pair_.server, &rmsg, 0), 3);
  EXPECT_EQ(rmsg.msg_namelen, 0u) << "a stream socket reports no source address";
  EXPECT_EQ(rmsg.msg_controllen, 0u);
  EXPECT_EQ(rmsg.msg_flags, 0);
  ASSERT_EQ(sendto(pair_.client, "to", 2, 0, nullptr, 0), 2);
  socklen_t len = sizeof from;
  ASSERT_EQ(recvfrom(pair_.server, buf, 2, MSG_WAITALL, reinterpret_cast<sockaddr*>(&from), &len),
            2);
  EXPECT_EQ(len, 0u);
}

TEST_P(FdTest, SendfileWithAndWithoutOffset) {
  char path[] = "/tmp/sanlib-sendfile-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  std::string content(300000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7 + i / 251);
  ASSERT_EQ(write(file, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  std::string received;
  std::thread reader([&] { received = ReadN(pair_.server, 300000 - 1000 + 5000); });
  off_t offset = 1000;
  ASSERT_EQ(lseek(file, 42, SEEK_SET), 42);
  ASSERT_EQ(sendfile(pair_.client, file, &offset, content.size()),
            static_cast<ssize_t>(content.size() - 1000));
  EXPECT_EQ(offset, static_cast<off_t>(content.size()));
  EXPECT_EQ(lseek(file, 0, SEEK_CUR), 42) << "with an offset, the file position is untouched";
  ASSERT_EQ(lseek(file, 0, SEEK_SET), 0);
  ASSERT_EQ(sendfile(pair_.client, file, nullptr, 5000), 5000);
  EXPECT_EQ(lseek(file, 0, SEEK_CUR), 5000) << "without, it advances";
  reader.join();
  EXPECT_TRUE(received == content.substr(1000) + content.substr(0, 5000));
  close(file);
}

TEST_P(FdTest, FdopenStdioBothWays) {
  FILE* out = fdopen(dup(pair_.client), "w");
  ASSERT_NE(out, nullptr);
  ASSERT_GT(fprintf(out, "hello %d %s\n", 42, "world"), 0);
  ASSERT_EQ(fflush(out), 0);
  EXPECT_EQ(ReadN(pair_.server, 15), "hello 42 world\n");
  FILE* in = fdopen(dup(pair_.server), "r");
  ASSERT_NE(in, nullptr);
  ASSERT_EQ(write(pair_.client, "line one\nline two\n", 18), 18);
  char line[64];
  ASSERT_NE(fgets(line, sizeof line, in), nullptr);
  EXPECT_STREQ(line, "line one\n");
  ASSERT_NE(fgets(line, sizeof line, in), nullptr);
  EXPECT_STREQ(line, "line two\n");
  EXPECT_EQ(fclose(out), 0);
  EXPECT_EQ(fclose(in), 0);
  EXPECT_EQ(fdopen(pair_.client, "x"), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(FdTest, SelectAndPollMixedWithAPipe) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const int nfds = std::max(pair_.server, pipefd[0]) + 1;
  fd_set r;
  FD_ZERO(&r);
  FD_SET(pair_.server, &r);
  FD_SET(pipefd[0], &r);
  timeval tv{0, 50000};
  EXPECT_EQ(select(nfds, &r, nullptr, nullptr, &tv), 0);
  EXPECT_EQ(tv.tv_sec, 0);
  EXPECT_EQ(tv.tv_usec, 0) << "Linux writes back the time left";
  ASSERT_EQ(write(pair_.client, "s", 1), 1);
  FD_ZERO(&r);
  FD_SET(pair_.server, &r);
  FD_SET(pipefd[0], &r);
  fd_set w;
  FD_ZERO(&w);
  FD_SET(pair_.client, &w);
  timeval wait{5, 0};
  EXPECT_EQ(select(std::max(nfds, pair_.client + 1), &r, &w, nullptr, &wait), 2);
  EXPECT_TRUE(FD_ISSET(pair_.server, &r));
  EXPECT_FALSE(FD_ISSET(pipefd[0], &r));
  EXPECT_TRUE(FD_ISSET(pair_.client, &w));
  timespec ts{5, 0};
  FD_ZERO(&r);
  FD_SET(pair_.server, &r);
  EXPECT_EQ(pselect(pair_.server + 1, &r, nullptr, nullptr, &ts, nullptr), 1);
  pollfd p[2] = {{pair_.server, POLLIN, 0}, {pipefd[0], POLLIN, 0}};
  EXPECT_EQ(poll(p, 2, 5000), 1);
  EXPECT_EQ(p[0].revents, POLLIN);
  EXPECT_EQ(p[1].revents, 0);
  // A closed fd in a select set is EBADF (poll would say POLLNVAL).
  const int closed = dup(pipefd[1]);
  close(closed);
  FD_ZERO(&r);
  FD_SET(pair_.server, &r);
  FD_SET(closed, &r);
  timeval zero{0, 0};
  EXPECT_EQ(select(std::max(pair_.server, closed) + 1, &r, nullptr, nullptr, &zero), -1);
  EXPECT_EQ(errno, EBADF);
  close(pipefd[0]);
  close(pipefd[1]);
}

INSTANTIATE_TEST_SUITE_P(Both, FdTest, ::testing::Bool(), Name);

}  // namespace
}  // namespace san::testing_support
