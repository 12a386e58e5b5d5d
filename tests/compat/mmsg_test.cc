// sendmmsg/recvmmsg and epoll_pwait2 on SAN sockets, each case run on a SAN pair and on a kernel
// pair (the oracle, pair.h): message counts and lengths, MSG_WAITFORONE, EAGAIN, EOF entries, the
// timeout written back, and epoll_pwait2's nanosecond timeout and its EINVAL.
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compat/pair.h"

namespace san::testing_support {
namespace {

class MessageBatchTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { MakePair(GetParam(), &pair_); }

  void Send(const std::string& s) {
    ASSERT_EQ(write(pair_.client, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  // Until `n` bytes are queued at the server end (both kinds count them in FIONREAD).
  void WaitQueued(int n) {
    for (int i = 0; i < 5000; ++i) {
      int queued = 0;
      ASSERT_EQ(ioctl(pair_.server, FIONREAD, &queued), 0);
      if (queued >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    FAIL() << "bytes did not arrive";
  }
  // `count` receive entries of `size` bytes each.
  struct Batch {
    Batch(int count, size_t size)
        : buffers(count, std::string(size, '\0')), iov(count), msgs(count) {
      for (int i = 0; i < count; ++i) {
        iov[i] = iovec{buffers[i].data(), size};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
    }
    std::string Got(int i) const { return buffers[i].substr(0, msgs[i].msg_len); }
    std::vector<std::string> buffers;
    std::vector<iovec> iov;
    std::vector<mmsghdr> msgs;
  };

  TcpPair pair_;
};

TEST_P(MessageBatchTest, SendmmsgSendsEachMessageInOrder) {
  std::string parts[] = {"one", "two!", "three"};
  iovec iov[3];
  mmsghdr msgs[3] = {};
  for (int i = 0; i < 3; ++i) {
    iov[i] = iovec{parts[i].data(), parts[i].size()};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  ASSERT_EQ(sendmmsg(pair_.client, msgs, 3, 0), 3) << strerror(errno);
  EXPECT_EQ(msgs[0].msg_len, 3u);
  EXPECT_EQ(msgs[1].msg_len, 4u);
  EXPECT_EQ(msgs[2].msg_len, 5u);
  EXPECT_EQ(sendmmsg(pair_.client, msgs, 0, 0), 0);
  WaitQueued(12);
  char buf[32] = {};
  ASSERT_EQ(read(pair_.server, buf, sizeof buf), 12);
  EXPECT_EQ(std::string(buf), "onetwo!three");
}

TEST_P(MessageBatchTest, RecvmmsgWaitForOneFillsWhatIsThere) {
  Send("0123456789");
  WaitQueued(10);
  Batch b(3, 4);
  ASSERT_EQ(recvmmsg(pair_.server, b.msgs.data(), 3, MSG_WAITFORONE, nullptr), 3)
      << strerror(errno);
  EXPECT_EQ(b.Got(0), "0123");
  EXPECT_EQ(b.Got(1), "4567");
  EXPECT_EQ(b.Got(2), "89");
}

TEST_P(MessageBatchTest, RecvmmsgWaitForOneStopsWhenEmpty) {
  Send("abcde");
  WaitQueued(5);
  Batch b(3, 4);
  ASSERT_EQ(recvmmsg(pair_.server, b.msgs.data(), 3, MSG_WAITFORONE, nullptr), 2);
  EXPECT_EQ(b.Got(0), "abcd");
  EXPECT_EQ(b.Got(1), "e");
  EXPECT_EQ(recvmmsg(pair_.server, b.msgs.data(), 0, 0, nullptr), 0);
}

TEST_P(MessageBatchTest, RecvmmsgNothingThereIsEagain) {
  Batch b(2, 4);
  errno = 0;
  EXPECT_EQ(recvmmsg(pair_.server, b.msgs.data(), 2, MSG_DONTWAIT, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_P(MessageBatchTest, RecvmmsgAtEofGivesEmptyEntries) {
  Send("ab");
  ASSERT_EQ(shutdown(pair_.client, SHUT_WR), 0);
  pollfd p{pair_.server, POLLRDHUP, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  Batch b(3, 4);
  ASSERT_EQ(recvmmsg(pair_.server, b.msgs.data(), 3, MSG_WAITFORONE, nullptr), 3);
  EXPECT_EQ(b.Got(0), "ab");
  EXPECT_EQ(b.msgs[1].msg_len, 0u);
  EXPECT_EQ(b.msgs[2].msg_len, 0u);
}

TEST_P(MessageBatchTest, RecvmmsgWritesBackTheTimeLeft) {
  Send("0123456789");
  WaitQueued(10);
  Batch b(3, 4);
  timespec timeout{5, 0};
  ASSERT_EQ(recvmmsg(pair_.server, b.msgs.data(), 3, MSG_WAITFORONE, &timeout), 3);
  EXPECT_TRUE(timeout.tv_sec == 4 || (timeout.tv_sec == 5 && timeout.tv_nsec == 0))
      << timeout.tv_sec << "." << timeout.tv_nsec;
  timespec bad{0, 1000000000};
  errno = 0;
  EXPECT_EQ(recvmmsg(pair_.server, b.msgs.data(), 3, 0, &bad), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(MessageBatchTest, EpollPwait2) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 42;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, pair_.server, &ev), 0);
  epoll_event out[4];
  const timespec zero{0, 0};
  EXPECT_EQ(epoll_pwait2(ep, out, 4, &zero, nullptr), 0);
  const timespec short_wait{0, 30 * 1000 * 1000};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(epoll_pwait2(ep, out, 4, &short_wait, nullptr), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(29));
  Send("x");
  const timespec five{5, 0};
  ASSERT_EQ(epoll_pwait2(ep, out, 4, &five, nullptr), 1);
  EXPECT_EQ(out[0].data.u64, 42u);
  EXPECT_TRUE(out[0].events & EPOLLIN);
  const timespec bad{0, -1};
  errno = 0;
  EXPECT_EQ(epoll_pwait2(ep, out, 4, &bad, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  close(ep);
}

INSTANTIATE_TEST_SUITE_P(Both, MessageBatchTest, ::testing::Bool(), Name);

}  // namespace
}  // namespace san::testing_support
