// san_recvfile and san_sendfile: every case runs on a SAN pair (shared memory) and on a plain
// kernel TCP pair (the same calls take the kernel path there), with the same expectations;
// sendfile's are also checked against the kernel's own sendfile(2) on a kernel pair. Bytes are
// checked exactly; a file that refuses bytes (EFBIG, EBADF) must leave them queued in the socket.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/inet.h"
#include "support/temp_file.h"

#include "san/san.h"

namespace {

using san::testing_support::TempFile;

using san::testing_support::Loopback;
using san::testing_support::PortOf;

std::vector<char> Pattern(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : v) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return v;
}

// A connected pair: SAN (both ends shm) or plain kernel TCP.
struct Pair {
  int a = -1, b = -1;
  bool san = false;
  ~Pair() {
    if (a >= 0) san_close(a);
    if (b >= 0) san_close(b);
  }
};

void MakePair(bool san, Pair* p) {
  p->san = san;
  auto sock = [&] {
    return san ? san_socket(AF_INET, SOCK_STREAM, 0) : socket(AF_INET, SOCK_STREAM, 0);
  };
  int lfd = sock();
  ASSERT_GE(lfd, 0);
  sockaddr_in addr = Loopback(0);
  ASSERT_EQ(san_bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(san ? san_listen(lfd, 4) : listen(lfd, 4), 0);
  addr = Loopback(PortOf(lfd));
  p->a = sock();
  ASSERT_EQ(san ? san_connect(p->a, reinterpret_cast<sockaddr*>(&addr), sizeof addr)
                : connect(p->a, reinterpret_cast<sockaddr*>(&addr), sizeof addr),
            0);
  p->b = san ? san_accept(lfd, nullptr, nullptr) : accept(lfd, nullptr, nullptr);
  ASSERT_GE(p->b, 0);
  san ? san_close(lfd) : close(lfd);
  san_info info{};
  if (san) {
    ASSERT_EQ(san_getinfo(p->b, &info), 0);
    ASSERT_EQ(info.mode, SAN_MODE_SHM) << info.fallback;
  } else {
    ASSERT_EQ(san_is_socket(p->b), 0);
  }
}

// Sends `data` from another thread, then shuts down writing.
std::thread Sender(int fd, const std::vector<char>& data) {
  return std::thread([fd, &data] {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = san_send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
    san_shutdown(fd, SHUT_WR);
  });
}

class FileTransfer : public ::testing::TestWithParam<bool> {
 protected:
  // Every wait is for bytes that must come: a hang is a failure (SIGALRM ends the run), not a
  // stall.
  void SetUp() override {
    alarm(60);
    ASSERT_NO_FATAL_FAILURE(MakePair(GetParam(), &pair_));
  }
  void TearDown() override { alarm(0); }
  Pair pair_;
};

TEST_P(FileTransfer, RecvfileWritesTheStreamAtTheFilePositionThenEof) {
  const std::vector<char> data = Pattern(3 * 1024 * 1024 + 12345, 1);
  TempFile file;
  ASSERT_GE(file.fd(), 0);
  ASSERT_EQ(write(file.fd(), "head", 4), 4);  // the file position, not offset 0, is where it goes
  std::thread sender = Sender(pair_.a, data);
  size_t total = 0;
  int calls = 0;
  for (;;) {
    ssize_t n = san_recvfile(pair_.b, file.fd(), nullptr, 1 << 20);
    ASSERT_GE(n, 0) << strerror(errno);
    if (n == 0) break;
    ASSERT_LE(n, 1 << 20);
    total += static_cast<size_t>(n);
    ++calls;
  }
  sender.join();
  EXPECT_EQ(total, data.size());
  EXPECT_EQ(lseek(file.fd(), 0, SEEK_CUR), static_cast<off_t>(4 + data.size()));
  std::vector<char> want(data);
  want.insert(want.begin(), {'h', 'e', 'a', 'd'});
  EXPECT_TRUE(file.Contents() == want);
  EXPECT_EQ(san_recvfile(pair_.b, file.fd(), nullptr, 100), 0);  // EOF stays EOF
}

TEST_P(FileTransfer, RecvfileWithOffsetUsesPwriteAndLeavesThePositionAlone) {
  const std::vector<char> data = Pattern(700000, 2);
  TempFile file;
  std::thread sender = Sender(pair_.a, data);
  off_t offset = 1000;
  size_t total = 0;
  for (;;) {
    ssize_t n = san_recvfile(pair_.b, file.fd(), &offset, 65536);
    ASSERT_GE(n, 0) << strerror(errno);
    if (n == 0) break;
    ASSERT_LE(n, 65536);
    total += static_cast<size_t>(n);
    ASSERT_EQ(offset, static_cast<off_t>(1000 + total));
  }
  sender.join();
  EXPECT_EQ(total, data.size());
  EXPECT_EQ(lseek(file.fd(), 0, SEEK_CUR), 0);
  std::vector<char> got = file.Contents();
  ASSERT_EQ(got.size(), 1000 + data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), got.begin() + 1000));
}

TEST_P(FileTransfer, RecvfileCountIsALimitAndTheRestStaysQueued) {
  const std::vector<char> data = Pattern(100000, 3);
  ASSERT_EQ(san_send(pair_.a, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  TempFile file;
  ssize_t n = san_recvfile(pair_.b, file.fd(), nullptr, 777);
  ASSERT_GE(n, 1);
  ASSERT_LE(n, 777);
  std::vector<char> rest(data.size());
  size_t got = 0;
  while (got < data.size() - static_cast<size_t>(n)) {
    ssize_t m = san_recv(pair_.b, rest.data() + got, data.size() - static_cast<size_t>(n) - got, 0);
    ASSERT_GT(m, 0);
    got += static_cast<size_t>(m);
  }
  std::vector<char> whole = file.Contents();
  whole.insert(whole.end(), rest.begin(), rest.begin() + static_cast<long>(got));
  EXPECT_TRUE(whole == data);
}

TEST_P(FileTransfer, NonblockingRecvfileWithNothingQueuedIsEagain) {
  TempFile file;
  const int fl = san_fcntl(pair_.b, F_GETFL);
  ASSERT_EQ(san_fcntl(pair_.b, F_SETFL, fl | O_NONBLOCK), 0);
  errno = 0;
  EXPECT_EQ(san_recvfile(pair_.b, file.fd(), nullptr, 4096), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << strerror(errno);
}

TEST_P(FileTransfer, AFileThatRefusesTheBytesLeavesThemInTheSocket) {
  const std::vector<char> data = Pattern(200000, 4);
  ASSERT_EQ(san_send(pair_.a, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  TempFile file;
  const int read_only = open(file.path().c_str(), O_RDONLY);
  ASSERT_GE(read_only, 0);
  errno = 0;
  EXPECT_EQ(san_recvfile(pair_.b, read_only, nullptr, data.size()), -1);
  EXPECT_EQ(errno, EBADF);
  close(read_only);

  // A file size limit: the write stops part-way (a short count), the next call fails with EFBIG,
  // and every byte the file did not take is still readable from the socket, in order.
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &old);
  rlimit saved{};
  getrlimit(RLIMIT_FSIZE, &saved);
  rlimit limit = saved;
  limit.rlim_cur = 50000;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  size_t written = 0;
  int error = 0;
  for (int i = 0; i < 100 && !error; ++i) {
    ssize_t n = san_recvfile(pair_.b, file.fd(), nullptr, data.size());
    if (n < 0) {
      error = errno;
    } else {
      ASSERT_GT(n, 0);
      written += static_cast<size_t>(n);
    }
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  sigaction(SIGXFSZ, &old, nullptr);
  EXPECT_EQ(error, EFBIG);
  EXPECT_EQ(written, 50000u);
  std::vector<char> rest(data.size() - written);
  size_t got = 0;
  while (got < rest.size()) {
    ssize_t m = san_recv(pair_.b, rest.data() + got, rest.size() - got, 0);
    ASSERT_GT(m, 0);
    got += static_cast<size_t>(m);
  }
  std::vector<char> whole = file.Contents();
  EXPECT_EQ(whole.size(), written);
  whole.insert(whole.end(), rest.begin(), rest.end());
  EXPECT_TRUE(whole == data);
}

TEST_P(FileTransfer, PeerResetIsReportedLikeRecv) {
  char unread = 'x';
  ASSERT_EQ(san_send(pair_.b, &unread, 1, 0), 1);  // unread data: close resets on both kinds
  // Let it arrive so the close surely sees it.
  pollfd p{pair_.a, POLLIN, 0};
  ASSERT_EQ(san_poll(&p, 1, 5000), 1);
  ASSERT_EQ(san_close(pair_.a), 0);
  pair_.a = -1;
  TempFile file;
  errno = 0;
  EXPECT_EQ(san_recvfile(pair_.b, file.fd(), nullptr, 4096), -1);
  EXPECT_EQ(errno, ECONNRESET) << strerror(errno);
}

// sendfile: the same file sent by san_sendfile on this pair and by the kernel's sendfile on a
// kernel pair; return values, offsets and the file position must agree, and the bytes arrive
// intact.
struct SendfileRun {
  std::vector<ssize_t> results;
  std::vector<off_t> offsets;
  off_t position = -1;
  std::vector<char> received;
};

SendfileRun RunSendfile(Pair& pair, int file_fd, bool use_san) {
  SendfileRun run;
  lseek(file_fd, 5, SEEK_SET);
  std::vector<char> received;
  std::thread reader([&] {
    char buf[65536];
    for (;;) {
      ssize_t n = san_recv(pair.b, buf, sizeof buf, 0);
      if (n <= 0) return;
      received.insert(received.end(), buf, buf + n);
    }
  });
  auto call = [&](off_t* off, size_t count) {
    return use_san ? san_sendfile(pair.a, file_fd, off, count)
                   : sendfile(pair.a, file_fd, off, count);
  };
  off_t off = 100;
  run.results.push_back(call(&off, 300000));  // explicit offset: the position stays
  run.offsets.push_back(off);
  run.results.push_back(call(nullptr, 1000));  // the file position, advanced
  run.results.push_back(call(&off, 0));
  off = 2000000;  // beyond the end: 0
  run.results.push_back(call(&off, 10));
  run.offsets.push_back(off);
  run.position = lseek(file_fd, 0, SEEK_CUR);
  san_shutdown(pair.a, SHUT_WR);
  reader.join();
  run.received = std::move(received);
  return run;
}

TEST_P(FileTransfer, SendfileMatchesTheKernels) {
  TempFile file;
  const std::vector<char> data = Pattern(1500000, 5);
  ASSERT_EQ(write(file.fd(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  SendfileRun ours = RunSendfile(pair_, file.fd(), true);
  Pair kernel_pair;
  ASSERT_NO_FATAL_FAILURE(MakePair(false, &kernel_pair));
  SendfileRun kernel = RunSendfile(kernel_pair, file.fd(), false);
  EXPECT_EQ(ours.results, kernel.results);
  EXPECT_EQ(ours.offsets, kernel.offsets);
  EXPECT_EQ(ours.position, kernel.position);
  EXPECT_TRUE(ours.received == kernel.received);
  std::vector<char> want(data.begin() + 100, data.begin() + 300100);
  want.insert(want.end(), data.begin() + 5, data.begin() + 1005);
  EXPECT_TRUE(ours.received == want);
}

TEST_P(FileTransfer, SendfileFromAPipeIsEinvalLikeTheKernels) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(write(p[1], "abc", 3), 3);
  errno = 0;
  EXPECT_EQ(san_sendfile(pair_.a, p[0], nullptr, 3), -1);
  EXPECT_EQ(errno, EINVAL);
  close(p[0]);
  close(p[1]);
}

// Reads everything from `fd` on another thread until EOF.
struct Drain {
  explicit Drain(int fd)
      : thread([this, fd] {
          std::vector<char> buf(1 << 16);
          for (;;) {
            const ssize_t n = san_recv(fd, buf.data(), buf.size(), 0);
            if (n <= 0) return;
            bytes.insert(bytes.end(), buf.begin(), buf.begin() + n);
          }
        }) {}
  std::vector<char> Join() {
    thread.join();
    return std::move(bytes);
  }
  std::vector<char> bytes;
  std::thread thread;
};

TEST_P(FileTransfer, OneBlockingSendfilePastTheEndSendsTheRestOfTheFile) {
  TempFile file;
  const std::vector<char> data = Pattern(5000000, 11);
  ASSERT_EQ(write(file.fd(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  Drain drain(pair_.b);
  off_t off = 777;
  EXPECT_EQ(san_sendfile(pair_.a, file.fd(), &off, 10000000),
            static_cast<ssize_t>(data.size() - 777));
  EXPECT_EQ(off, static_cast<off_t>(data.size()));
  san_shutdown(pair_.a, SHUT_WR);
  EXPECT_TRUE(drain.Join() == std::vector<char>(data.begin() + 777, data.end()));
}

TEST_P(FileTransfer, NonblockingSendfileTakesWhatFitsThenEagain) {
  TempFile file;
  const std::vector<char> data = Pattern(16u << 20, 12);
  ASSERT_EQ(write(file.fd(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(san_fcntl(pair_.a, F_SETFL, O_NONBLOCK), 0);
  ASSERT_EQ(lseek(file.fd(), 0, SEEK_SET), 0);
  // Nobody reads: each call takes what the channel holds, then EAGAIN; the file position is just
  // past what was taken.
  size_t taken = 0;
  ssize_t n = 0;
  for (int i = 0; i < 1000; ++i) {
    n = san_sendfile(pair_.a, file.fd(), nullptr, data.size() - taken);
    if (n <= 0) break;
    taken += static_cast<size_t>(n);
  }
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_GT(taken, 0u);
  EXPECT_LT(taken, data.size());
  EXPECT_EQ(lseek(file.fd(), 0, SEEK_CUR), static_cast<off_t>(taken));
  Drain drain(pair_.b);
  san_shutdown(pair_.a, SHUT_WR);
  EXPECT_TRUE(drain.Join() == std::vector<char>(data.begin(), data.begin() + taken));
}

TEST_P(FileTransfer, SendfileKeepsItsPlaceBehindEarlierSmallSends) {
  TempFile file;
  const std::vector<char> data = Pattern(300000, 13);
  ASSERT_EQ(write(file.fd(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  Drain drain(pair_.b);
  std::vector<char> want;
  for (int i = 0; i < 3; ++i) {
    const std::string header = "HEADER " + std::to_string(i) + "\r\n";
    ASSERT_EQ(san_send(pair_.a, header.data(), header.size(), 0),
              static_cast<ssize_t>(header.size()));
    off_t off = 1000 * i;
    ASSERT_EQ(san_sendfile(pair_.a, file.fd(), &off, 100000), 100000);
    want.insert(want.end(), header.begin(), header.end());
    want.insert(want.end(), data.begin() + 1000 * i, data.begin() + 1000 * i + 100000);
  }
  san_shutdown(pair_.a, SHUT_WR);
  EXPECT_TRUE(drain.Join() == want);
}

// A file's error and the socket's, each as the kernel's sendfile reports it.
TEST_P(FileTransfer, SendfileErrorsMatchTheKernels) {
  TempFile file;
  ASSERT_EQ(write(file.fd(), "abcdef", 6), 6);
  const int wronly = open(file.path().c_str(), O_WRONLY);
  ASSERT_GE(wronly, 0);
  off_t off = 0;
  errno = 0;
  EXPECT_EQ(san_sendfile(pair_.a, wronly, &off, 6), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(off, 0);
  close(wronly);
  // The connection is untouched by the file's error.
  EXPECT_EQ(san_sendfile(pair_.a, file.fd(), &off, 6), 6);
  char got[6];
  EXPECT_EQ(san_recv(pair_.b, got, 6, MSG_WAITALL), 6);
  EXPECT_EQ(std::string(got, 6), "abcdef");
  // After shutdown(SHUT_WR): EPIPE (SIGPIPE ignored here, as a server would).
  ASSERT_EQ(san_shutdown(pair_.a, SHUT_WR), 0);
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
  off = 0;
  errno = 0;
  EXPECT_EQ(san_sendfile(pair_.a, file.fd(), &off, 6), -1);
  EXPECT_EQ(errno, EPIPE);
  sigaction(SIGPIPE, &old, nullptr);
}

TEST_P(FileTransfer, SendfileOfAFileOutOfThePageCacheArrivesIntact) {
  TempFile file;
  const std::vector<char> data = Pattern(3000000, 14);
  ASSERT_EQ(write(file.fd(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  // Dropped from the page cache where the file system allows it (not tmpfs): the reads then
  // find nothing cached, and the bytes are read ahead outside the stream's lock.
  fdatasync(file.fd());
  posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
  Drain drain(pair_.b);
  off_t off = 0;
  EXPECT_EQ(san_sendfile(pair_.a, file.fd(), &off, data.size()), static_cast<ssize_t>(data.size()));
  san_shutdown(pair_.a, SHUT_WR);
  EXPECT_TRUE(drain.Join() == data);
}

INSTANTIATE_TEST_SUITE_P(SanAndKernel, FileTransfer, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "San" : "KernelTcp");
                         });

}  // namespace
