// SAN sockets across fork(), exec() and process exit (DESIGN.md "Where state lives: fork safety"):
//   - fork + exec /bin/ls into a pipe amid a 100 MiB transfer, both directions (FTP LIST);
//   - accept + fork where the parent closes its copy and the child serves (forking servers), with
//     the parent closing at once and while the child is mid-transfer;
//   - fork children that never touch an inherited connection, leaving by _exit() and by exit():
//     the parent's connection must keep working and close cleanly afterwards;
//   - a process that leaves by exit(0) with data still to flush (the atexit hook posts it and the
//     FIN), and one that leaves by _exit(0) (the peer reads what was posted, then EOF or reset).
// Every process is reaped, every wait bounded (children arm alarm(); a Watchdog bounds each test).
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "robust_util.h"
#include "support/process.h"

#if defined(__SANITIZE_THREAD__)
// Every test forks children of a multithreaded process (sanlib's threads, the Watchdog) that start
// sanlib's threads again, which is what these tests are about; ThreadSanitizer kills such children
// unless told not to.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }
#endif

namespace san::testing {
namespace {

constexpr uint64_t kBigTransfer = 100ull << 20;
constexpr int kChildWaitMs = 30000;

// Exit codes of the helper processes: each names the check that failed.
enum Code : int {
  kOk = 0,
  kListenFailed = 10,
  kAcceptFailed = 11,
  kNotShm = 12,
  kCorrupt = 13,
  kShortData = 14,
  kNotEof = 15,  // the stream ended in an error where an orderly EOF was due
  kSendFailed = 16,
  kForkFailed = 17,
  kConnectFailed = 18,
  kEchoMismatch = 19,
  kGrandchildFailed = 20,  // + the grandchild's code is reported separately
};

// A server's first steps (in a child process): a SAN listener whose port goes to `port_ch`, and
// one connection accepted on it, checked to be on shm. Returns that connection's fd, or minus the
// Code of the step that failed; *lfd gets the listener.
int AcceptOneShm(Channel* port_ch, int* lfd) {
  uint16_t port = 0;
  *lfd = SanListener(&port);
  if (*lfd < 0) return -kListenFailed;
  port_ch->Put(port);
  const int c = san_accept(*lfd, nullptr, nullptr);
  if (c < 0) return -kAcceptFailed;
  if (!IsShm(c)) return -kNotShm;
  return c;
}

// A client's first step (in a child process): a SAN connection to `port`, checked to be on shm.
// Returns its fd, or minus the Code of the step that failed.
int ConnectShm(uint16_t port) {
  const int fd = SanConnect(port);
  if (fd < 0) return -kConnectFailed;
  if (!IsShm(fd)) return -kNotShm;
  return fd;
}

// Runs `/bin/ls -l /` with its stdout on a pipe; returns the pid, *read_fd the pipe (nonblocking).
pid_t SpawnLs(int* read_fd) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return -1;
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);  // dup2 clears FD_CLOEXEC on the copy
    execl("/bin/ls", "ls", "-l", "/", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    return -1;
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  *read_fd = out[0];
  return pid;
}

// Reads what is there on a nonblocking pipe; returns false once it reached EOF.
bool DrainPipe(int fd, std::string* out) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EINTR;
  }
}

// The LIST part of an FTP session: fork + exec ls, read its output to EOF while `step` keeps the
// transfer going (called repeatedly until it returns false, i.e. the transfer is done).
struct LsRun {
  std::string output;
  int status = -1;
};
LsRun ListWhile(const std::function<bool()>& step) {
  LsRun run;
  int rd = -1;
  const pid_t ls = SpawnLs(&rd);
  if (ls < 0) return run;
  bool open = true;
  bool busy = true;
  const uint64_t end = NowMs() + 20000;
  while ((open || busy) && NowMs() < end) {
    if (busy) busy = step();
    if (open) open = DrainPipe(rd, &run.output);
    if (open && !busy) {
      pollfd p{rd, POLLIN, 0};
      poll(&p, 1, 100);
    }
  }
  close(rd);
  run.status = testing_support::WaitOrKill(ls, 10000, false);
  return run;
}

void ExpectLsOk(const LsRun& ls) {
  EXPECT_FALSE(ls.output.empty()) << "ls -l / printed nothing";
  EXPECT_NE(ls.output.find("total"), std::string::npos) << ls.output;
  ASSERT_GE(ls.status, 0) << "ls did not finish";
  EXPECT_TRUE(WIFEXITED(ls.status) && WEXITSTATUS(ls.status) == 0) << "ls status " << ls.status;
}

// Test process sends 100 MiB; halfway it forks and the child execs ls into a pipe the parent reads
// to EOF while it keeps sending. The server verifies every byte and then an orderly EOF (our
// close must still send FIN although a fork child once shared the connection).
TEST(SocketFork, ExecLsWhileSending100MiB) {
  Watchdog dog(55);
  Channel port_ch, result_ch;
  Child server([&]() -> int {
    int lfd = -1;
    const int c = AcceptOneShm(&port_ch, &lfd);
    if (c < 0) return -c;
    const ReadResult r = ReadPattern(c, 0);
    result_ch.Put(r);
    if (r.corrupt) return kCorrupt;
    if (r.bytes != kBigTransfer) return kShortData;
    if (r.end != 0) return kNotEof;
    san_close(c);
    san_close(lfd);
    return kOk;
  });
  uint16_t port = 0;
  ASSERT_TRUE(port_ch.Get(&port, 5000));
  const int fd = SanConnect(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(IsShm(fd));

  uint64_t sent = SendPattern(fd, 0, kBigTransfer / 2);
  ASSERT_EQ(sent, kBigTransfer / 2) << strerror(errno);
  const LsRun ls = ListWhile([&] {
    if (sent >= kBigTransfer) return false;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(1 << 20, kBigTransfer - sent));
    const size_t done = SendPattern(fd, sent, n);
    sent += done;
    return done == n && sent < kBigTransfer;
  });
  EXPECT_EQ(sent, kBigTransfer) << strerror(errno);
  ExpectLsOk(ls);
  EXPECT_EQ(san_close(fd), 0);

  ReadResult r;
  const bool got = result_ch.Get(&r, kChildWaitMs);
  const int code = server.WaitCode(kChildWaitMs);
  ASSERT_TRUE(got) << "server reported nothing; exit " << code;
  EXPECT_FALSE(r.corrupt);
  EXPECT_EQ(r.bytes, kBigTransfer);
  EXPECT_EQ(r.end, 0) << "server saw " << strerror(r.end) << " instead of EOF after our close";
  EXPECT_EQ(code, kOk);
}

// The reverse: the server streams 100 MiB to the test process, which forks + execs ls halfway
// through its reading. The server then waits for our FIN: EOF, not a reset.
TEST(SocketFork, ExecLsWhileReceiving100MiB) {
  Watchdog dog(55);
  Channel port_ch, result_ch;
  Child server([&]() -> int {
    int lfd = -1;
    const int c = AcceptOneShm(&port_ch, &lfd);
    if (c < 0) return -c;
    if (SendPattern(c, 0, kBigTransfer) != kBigTransfer) return kSendFailed;
    if (san_shutdown(c, SHUT_WR) != 0) return kSendFailed;
    char byte;
    const ssize_t n = san_recv(c, &byte, 1, 0);
    const int end = n == 0 ? 0 : n < 0 ? errno : -1;
    result_ch.Put(end);
    san_close(c);
    san_close(lfd);
    return end == 0 ? kOk : kNotEof;
  });
  uint16_t port = 0;
  ASSERT_TRUE(port_ch.Get(&port, 5000));
  const int fd = SanConnect(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(IsShm(fd));

  ReadResult first = ReadPattern(fd, 0, kBigTransfer / 2);
  ASSERT_FALSE(first.corrupt);
  ASSERT_EQ(first.bytes, kBigTransfer / 2) << strerror(first.end);
  uint64_t got = first.bytes;
  bool failed = false;
  const LsRun ls = ListWhile([&] {
    const ReadResult r = ReadPattern(fd, got, 1 << 20);
    got += r.bytes;
    if (r.corrupt || r.end != -1) failed = r.corrupt || got < kBigTransfer || r.end != 0;
    return !failed && r.end == -1 && got < kBigTransfer;
  });
  ExpectLsOk(ls);
  EXPECT_FALSE(failed);
  EXPECT_EQ(got, kBigTransfer);
  char byte;
  EXPECT_EQ(san_recv(fd, &byte, 1, 0), 0) << "expected EOF after 100 MiB: " << strerror(errno);
  EXPECT_EQ(san_close(fd), 0);

  int end = -1;
  const bool reported = result_ch.Get(&end, kChildWaitMs);
  const int code = server.WaitCode(kChildWaitMs);
  ASSERT_TRUE(reported) << "server reported nothing; exit " << code;
  EXPECT_EQ(end, 0) << "server saw " << strerror(end) << " instead of our FIN";
  EXPECT_EQ(code, kOk);
}

// Echo service for the forking-server tests: echoes exactly `bytes` pattern bytes, checking each.
int ServeEcho(int c, uint64_t bytes, Channel* halfway) {
  std::vector<uint8_t> buf(128 * 1024);
  uint64_t done = 0;
  bool told = false;
  while (done < bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - done));
    const ssize_t n = san_recv(c, buf.data(), want, 0);
    if (n == 0) return kShortData;
    if (n < 0) return errno == EPIPE ? kSendFailed : kNotEof;
    if (!Pattern::Get().Check(done, buf.data(), static_cast<size_t>(n))) return kCorrupt;
    size_t off = 0;
    while (off < static_cast<size_t>(n)) {
      const ssize_t w = san_send(c, buf.data() + off, static_cast<size_t>(n) - off, MSG_NOSIGNAL);
      if (w <= 0) return kSendFailed;
      off += static_cast<size_t>(w);
    }
    done += static_cast<uint64_t>(n);
    if (halfway && !told && done >= bytes / 2) {
      told = halfway->Put(done);
    }
  }
  return kOk;
}

// Client half of an echo: sends `bytes` of pattern and reads them back, interleaved so neither
// window stalls; then expects EOF from the server's close.
struct EchoResult {
  uint64_t sent = 0;
  uint64_t received = 0;
  bool corrupt = false;
  int end = -1;  // 0: EOF after everything; else errno
};
EchoResult EchoAndExpectEof(int fd, uint64_t bytes) {
  EchoResult r;
  std::vector<uint8_t> buf(256 * 1024);
  const uint64_t end = NowMs() + 20000;
  while (r.received < bytes && NowMs() < end) {
    if (r.sent < bytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(64 * 1024, bytes - r.sent));
      const ssize_t w = san_send(fd, Pattern::Get().View(r.sent), n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        r.sent += static_cast<uint64_t>(w);
      } else if (errno != EAGAIN) {
        r.end = errno;
        return r;
      }
    }
    pollfd p{fd, static_cast<short>(POLLIN | (r.sent < bytes ? POLLOUT : 0)), 0};
    san_poll(&p, 1, 100);
    const ssize_t n = san_recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      if (!Pattern::Get().Check(r.received, buf.data(), static_cast<size_t>(n))) {
        r.corrupt = true;
        return r;
      }
      r.received += static_cast<uint64_t>(n);
    } else if (n == 0) {
      r.end = ECONNABORTED;  // EOF too early
      return r;
    } else if (errno != EAGAIN) {
      r.end = errno;
      return r;
    }
  }
  if (r.received < bytes) {
    r.end = ETIMEDOUT;
    return r;
  }
  char byte;
  const ssize_t n = san_recv(fd, &byte, 1, 0);
  r.end = n == 0 ? 0 : n < 0 ? errno : EPROTO;
  return r;
}

// The forking server for the accept + fork tests: listens, reports its port, accepts one SAN
// connection and forks a child that serves it (then closes it and exits through exit()). The
// parent closes its copy -- at once, or once the child is halfway -- and keeps going: it serves a
// second, short echo connection itself, then reports the child's code.
int ForkingServer(Channel* port_ch, Channel* child_code_ch, uint64_t bytes, bool close_at_once) {
  int lfd = -1;
  const int c = AcceptOneShm(port_ch, &lfd);
  if (c < 0) return -c;
  Channel halfway;
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) return kForkFailed;
  if (child == 0) {
    alarm(20);
    san_close(lfd);
    const int code = ServeEcho(c, bytes, &halfway);
    san_close(c);
    ChildExit(code);  // through the atexit hook, as a real server would
  }
  if (!close_at_once) {
    uint64_t done = 0;
    if (!halfway.Get(&done, 15000)) {
      kill(child, SIGKILL);
    }
  }
  san_close(c);
  // Keep going: a second connection, served by this process.
  const int c2 = san_accept(lfd, nullptr, nullptr);
  int own = kOk;
  if (c2 < 0) {
    own = kAcceptFailed;
  } else {
    own = IsShm(c2) ? ServeEcho(c2, 64 * 1024, nullptr) : kNotShm;
    san_close(c2);
  }
  const int st = testing_support::WaitOrKill(child, 20000, false);
  const int child_code = Child::Code(st);
  child_code_ch->Put(child_code);
  san_close(lfd);
  if (own != kOk) return own;
  return child_code == kOk ? kOk : kGrandchildFailed;
}

void RunForkingServer(bool close_at_once, uint64_t bytes) {
  Channel port_ch, child_code_ch;
  Child server([&] { return ForkingServer(&port_ch, &child_code_ch, bytes, close_at_once); });
  uint16_t port = 0;
  ASSERT_TRUE(port_ch.Get(&port, 5000));
  const int fd = SanConnect(port);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(IsShm(fd));
  const EchoResult r = EchoAndExpectEof(fd, bytes);
  EXPECT_FALSE(r.corrupt);
  EXPECT_EQ(r.sent, bytes);
  EXPECT_EQ(r.received, bytes);
  EXPECT_EQ(r.end, 0) << "expected EOF from the serving child's close, got " << strerror(r.end);
  EXPECT_EQ(san_close(fd), 0);
  // The parent server keeps working after it closed its copy.
  const int fd2 = SanConnect(port);
  ASSERT_GE(fd2, 0);
  EXPECT_TRUE(IsShm(fd2));
  SetNoDelay(fd2);
  const size_t small = 64 * 1024;
  EXPECT_EQ(SendPattern(fd2, 0, small), small);
  const ReadResult back = ReadPattern(fd2, 0, small);
  EXPECT_FALSE(back.corrupt);
  EXPECT_EQ(back.bytes, small);
  EXPECT_EQ(san_close(fd2), 0);

  int child_code = -1;
  const bool reported = child_code_ch.Get(&child_code, kChildWaitMs);
  const int code = server.WaitCode(kChildWaitMs);
  ASSERT_TRUE(reported) << "server reported nothing; exit " << code;
  EXPECT_EQ(child_code, kOk) << "serving child failed";
  EXPECT_EQ(code, kOk);
}

// Accept + fork + the parent closes at once (the classic forking server: the parent's close may
// well run before the child has even returned from fork()).
TEST(SocketFork, AcceptForkParentClosesAtOnceChildServes) {
  Watchdog dog(50);
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_NO_FATAL_FAILURE(RunForkingServer(/*close_at_once=*/true, 4u << 20));
    if (HasFailure()) break;
  }
}

// The parent closes its copy while the child is in the middle of the transfer.
TEST(SocketFork, AcceptForkParentClosesMidTransfer) {
  Watchdog dog(50);
  RunForkingServer(/*close_at_once=*/false, 8u << 20);
}

// An echo peer for the "child ignores the connection" tests: echoes until EOF and reports how the
// stream ended (0 = orderly EOF) and how many bytes it echoed.
struct EchoEnd {
  uint64_t bytes = 0;
  int end = -1;
};
int EchoUntilEof(Channel* port_ch, Channel* end_ch) {
  int lfd = -1;
  const int c = AcceptOneShm(port_ch, &lfd);
  if (c < 0) return -c;
  SetNoDelay(c);
  EchoEnd e;
  std::vector<uint8_t> buf(64 * 1024);
  for (;;) {
    const ssize_t n = san_recv(c, buf.data(), buf.size(), 0);
    if (n <= 0) {
      e.end = n == 0 ? 0 : errno;
      break;
    }
    if (!Pattern::Get().Check(e.bytes, buf.data(), static_cast<size_t>(n))) return kCorrupt;
    if (san_send(c, buf.data(), static_cast<size_t>(n), MSG_NOSIGNAL) != n) return kSendFailed;
    e.bytes += static_cast<uint64_t>(n);
  }
  end_ch->Put(e);
  san_close(c);
  san_close(lfd);
  return e.end == 0 ? kOk : kNotEof;
}

// One echo round trip of `n` pattern bytes from stream position `pos`.
void RoundTrip(int fd, uint64_t pos, size_t n) {
  ASSERT_EQ(SendPattern(fd, pos, n), n) << strerror(errno);
  const ReadResult r = ReadPattern(fd, pos, n);
  ASSERT_FALSE(r.corrupt);
  ASSERT_EQ(r.bytes, n) << "echo stopped: " << strerror(r.end);
}

// The parent's close thread has run (it now sleeps on its condition variable) when it forks; the
// child then closes a SAN socket of its own, which wakes the child's close thread. The child's copy
// of the condition variable must not still count the parent's sleeping thread as a waiter.
// A SAN listener, a client connected to it and the accepted end, checked to be on shm.
struct Connected {
  uint16_t port = 0;
  int listener = -1, client = -1, accepted = -1;
};
void ConnectThroughListener(Connected* c) {
  c->listener = SanListener(&c->port);
  ASSERT_GE(c->listener, 0);
  c->client = SanConnect(c->port);
  ASSERT_GE(c->client, 0);
  c->accepted = san_accept(c->listener, nullptr, nullptr);
  ASSERT_GE(c->accepted, 0);
  ASSERT_TRUE(IsShm(c->accepted));
}

TEST(SocketFork, ChildClosesSocketAfterParentsCloseThreadRan) {
  Watchdog dog(30);
  Connected first;
  ASSERT_NO_FATAL_FAILURE(ConnectThroughListener(&first));
  const uint16_t port = first.port;
  const int lfd = first.listener;
  EXPECT_EQ(san_close(first.client), 0);  // starts our close thread
  EXPECT_EQ(san_close(first.accepted), 0);
  SleepMs(100);  // both finished; the close thread sleeps
  for (int round = 0; round < 3; ++round) {
    Channel go;
    Child child([&]() -> int {
      const int fd = ConnectShm(port);
      if (fd < 0) return -fd;
      if (SendPattern(fd, 0, 1000) != 1000) return kSendFailed;
      int ok = 0;
      if (!go.Get(&ok, 5000)) return kNotEof;
      if (san_close(fd) != 0) return kSendFailed;  // hands the stream to the close thread
      ChildExit(0);                                // and the exit hook waits for it
    });
    const int c = san_accept(lfd, nullptr, nullptr);
    ASSERT_GE(c, 0);
    EXPECT_TRUE(IsShm(c));
    go.Put(1);
    const ReadResult r = ReadPattern(c, 0);
    EXPECT_EQ(r.bytes, 1000u);
    EXPECT_EQ(r.end, 0) << strerror(r.end);
    EXPECT_EQ(child.WaitCode(5000), 0) << "the child hung in close() or exit()";
    san_close(c);
  }
  san_close(lfd);
}

// The first close in a fork child must not wait for the socket table's lifetime lock, which the
// parent's fork handler held across fork (a glibc rwlock cannot be unlocked by the child's thread,
// whose TID differs from the locker's: the child used to hang here forever).
TEST(SocketFork, ChildClosesInheritedSocketsAtOnce) {
  Watchdog dog(30);
  Connected conn;
  ASSERT_NO_FATAL_FAILURE(ConnectThroughListener(&conn));
  const int lfd = conn.listener, fd = conn.client, c = conn.accepted;
  Child child([&]() -> int {
    if (san_close(lfd) != 0 || san_close(c) != 0) return kSendFailed;
    ChildExit(0);
  });
  EXPECT_EQ(child.WaitCode(5000), 0) << "the child hung in close()";
  EXPECT_EQ(san_close(c), 0);
  EXPECT_EQ(san_close(fd), 0);
  EXPECT_EQ(san_close(lfd), 0);
}

// A client that connects, sends, closes and exits before the server gets round to accept(): as
// with kernel TCP, accept() still returns the connection and it reads the data, then EOF.
TEST(SocketFork, ClientThatFinishedBeforeAcceptIsDelivered) {
  Watchdog dog(30);
  uint16_t port = 0;
  const int lfd = SanListener(&port);
  ASSERT_GE(lfd, 0);
  for (bool close_first : {true, false}) {
    SCOPED_TRACE(close_first ? "close, then exit" : "exit with the socket open");
    Child client([&]() -> int {
      const int fd = ConnectShm(port);
      if (fd < 0) return -fd;
      if (SendPattern(fd, 0, 100000) != 100000) return kSendFailed;
      if (close_first && san_close(fd) != 0) return kSendFailed;
      ChildExit(0);
    });
    ASSERT_EQ(client.WaitCode(10000), 0);
    SleepMs(50);  // let the connection thread see the client gone
    const int c = san_accept(lfd, nullptr, nullptr);
    ASSERT_GE(c, 0);
    EXPECT_TRUE(IsShm(c));
    const ReadResult r = ReadPattern(c, 0);
    EXPECT_FALSE(r.corrupt);
    EXPECT_EQ(r.bytes, 100000u);
    EXPECT_EQ(r.end, 0) << strerror(r.end);
    san_close(c);
  }
  san_close(lfd);
}

enum class LeaveBy { kUnderscoreExit, kExit, kExitAfterClosingItsCopy };

// The test process holds a SAN connection, forks a child that does not use it, and the child
// leaves. The parent's connection must be untouched (no FIN from the child's exit hook: our next
// send would fail with EPIPE and the peer would see EOF) and close cleanly later (the peer sees
// our FIN, not a reset).
void ChildIgnoresConnection(LeaveBy how) {
  Watchdog dog(40);
  Channel port_ch, end_ch;
  Child peer([&] { return EchoUntilEof(&port_ch, &end_ch); });
  uint16_t port = 0;
  ASSERT_TRUE(port_ch.Get(&port, 5000));
  const int fd = SanConnect(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(IsShm(fd));
  SetNoDelay(fd);
  ASSERT_NO_FATAL_FAILURE(RoundTrip(fd, 0, 256 * 1024));  // well within both windows

  Child bystander([&]() -> int {
    switch (how) {
      case LeaveBy::kUnderscoreExit:
        _exit(0);
      case LeaveBy::kExit:
        ChildExit(0);
      case LeaveBy::kExitAfterClosingItsCopy:
        san_close(fd);
        ChildExit(0);
    }
    return 0;
  });
  EXPECT_EQ(bystander.WaitCode(10000), 0);

  // The connection still works both ways, and our send side is not shut.
  for (int i = 1; i <= 4; ++i) ASSERT_NO_FATAL_FAILURE(RoundTrip(fd, i * 256 * 1024, 256 * 1024));
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  EXPECT_EQ(san_poll(&p, 1, 0), 0) << "peer closed? revents " << p.revents;
  EXPECT_EQ(san_close(fd), 0);

  EchoEnd e;
  const bool reported = end_ch.Get(&e, 10000);
  const int code = peer.WaitCode(10000);
  ASSERT_TRUE(reported) << "peer reported nothing; exit " << code;
  EXPECT_EQ(e.bytes, 5u * 256 * 1024);
  EXPECT_EQ(e.end, 0) << "after our close the peer saw " << strerror(e.end) << ", not EOF";
  EXPECT_EQ(code, kOk);
}

// A child made by a raw clone() runs no fork handler (vsftpd's isolate=YES sessions are made with
// clone(CLONE_NEWIPC|SIGCHLD)): sanlib finds out at the child's first set-up call and adopts the
// process state as a fork child's (runtime.h, "missed fork"). Its listener must then be answered
// by its own connection thread: the client gets a shm connection, the bytes echo. Before, nothing
// answered it (the parent's thread does not exist in the child): the client waited 5 s for a
// reply, then fell back to TCP.
TEST(SocketFork, RawCloneChildServesItsOwnListener) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not see a raw clone's child as a new process: the child re-making its
  // locks (placement new, Runtime::AdoptMissedFork) is reported as racing the parent's threads.
  GTEST_SKIP() << "a raw clone() child is not a process to ThreadSanitizer";
#endif
  Watchdog watchdog(60);
  // sanlib's threads run in this process before the clone, as under sanrun.
  uint16_t unused = 0;
  const int warm = SanListener(&unused);
  ASSERT_GE(warm, 0);
  SleepMs(50);  // both threads asleep: none holds a lock when the clone copies memory
  Channel port_ch;
  const long pid = syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, 0);
  ASSERT_GE(pid, 0) << strerror(errno);
  if (pid == 0) {
    alarm(30);
    int lfd = -1;
    const int c = AcceptOneShm(&port_ch, &lfd);
    if (c < 0) _exit(-c);
    char buf[4096];
    for (;;) {
      const ssize_t n = san_recv(c, buf, sizeof buf, 0);
      if (n < 0) _exit(kCorrupt);
      if (n == 0) break;
      if (san_send(c, buf, static_cast<size_t>(n), 0) != n) _exit(kSendFailed);
    }
    san_close(c);
    _exit(kOk);
  }
  uint16_t port = 0;
  ASSERT_TRUE(port_ch.Get(&port, 10000));
  const int fd = SanConnect(port);
  ASSERT_GE(fd, 0);
  san_info info{};
  ASSERT_EQ(san_getinfo(fd, &info), 0);
  EXPECT_EQ(info.mode, SAN_MODE_SHM) << info.fallback;
  const char out[] = "raw clone";
  char in[sizeof out] = {};
  ASSERT_EQ(san_send(fd, out, sizeof out, 0), static_cast<ssize_t>(sizeof out));
  ASSERT_EQ(san_recv(fd, in, sizeof in, MSG_WAITALL), static_cast<ssize_t>(sizeof in));
  EXPECT_STREQ(in, out);
  san_close(fd);
  EXPECT_EQ(testing_support::WaitOrKill(static_cast<pid_t>(pid), kChildWaitMs, false), kOk);
  san_close(warm);
}

TEST(SocketFork, ChildUnderscoreExitLeavesParentConnectionAlone) {
  ChildIgnoresConnection(LeaveBy::kUnderscoreExit);
}

TEST(SocketFork, ChildExitLeavesParentConnectionAlone) { ChildIgnoresConnection(LeaveBy::kExit); }

TEST(SocketFork, ChildClosingItsCopyLeavesParentConnectionAlone) {
  ChildIgnoresConnection(LeaveBy::kExitAfterClosingItsCopy);
}

// A writer that leaves with exit(0) while its window is full and its last bytes are still in the
// combine buffer (a small send, no credit to post it): the atexit hook must get them and the FIN
// posted once credits return (bounded by the linger), so the reader gets every byte, then EOF.
// `close_first`: the writer san_close()s the socket just before exit (the close thread holds it).
void ExitWithFullWindow(bool close_first) {
  Watchdog dog(40);
  constexpr size_t kTail = 100;  // small: combined, waits for a credit
  uint16_t port = 0;
  const int lfd = SanListener(&port);
  ASSERT_GE(lfd, 0);
  Channel sent_ch;
  Child writer([&]() -> int {
    const int fd = ConnectShm(port);
    if (fd < 0) return -fd;
    // Fill the window: packet-sized nonblocking sends until no credit is left.
    uint64_t sent = 0;
    for (;;) {
      const ssize_t n = san_send(fd, Pattern::Get().View(sent), 32768, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<uint64_t>(n);
      } else if (errno == EAGAIN) {
        break;
      } else {
        return kSendFailed;
      }
    }
    san_info info{};
    if (san_getinfo(fd, &info) != 0 || info.window != 0) return kSendFailed;
    if (san_send(fd, Pattern::Get().View(sent), kTail, MSG_DONTWAIT | MSG_NOSIGNAL) !=
        static_cast<ssize_t>(kTail)) {
      return kSendFailed;
    }
    sent += kTail;
    sent_ch.Put(sent);
    if (close_first && san_close(fd) != 0) return kSendFailed;
    ChildExit(0);
  });
  const int c = san_accept(lfd, nullptr, nullptr);
  ASSERT_GE(c, 0);
  ASSERT_TRUE(IsShm(c));
  uint64_t sent = 0;
  ASSERT_TRUE(sent_ch.Get(&sent, 10000)) << "writer exit " << writer.WaitCode(1000);
  SleepMs(200);  // the writer is inside exit() now, with nothing we freed yet
  const uint64_t t0 = NowMs();
  const ReadResult r = ReadPattern(c, 0);
  EXPECT_FALSE(r.corrupt);
  EXPECT_EQ(r.bytes, sent) << "bytes lost at exit";
  EXPECT_EQ(r.end, 0) << "expected EOF (FIN from the exit path), got " << strerror(r.end);
  EXPECT_LT(NowMs() - t0, 5000u);
  EXPECT_EQ(writer.WaitCode(10000), 0);
  san_close(c);
  san_close(lfd);
}

TEST(SocketExit, ExitWithOpenSocketFlushesAndSendsFin) { ExitWithFullWindow(false); }

TEST(SocketExit, ExitRightAfterCloseFlushesAndSendsFin) { ExitWithFullWindow(true); }

// A writer that leaves with _exit(0) (no hooks at all): the reader gets every byte that was posted
// (a blocking send of bulk data returns once all of it is posted), then EOF or ECONNRESET, in
// bounded time.
TEST(SocketExit, UnderscoreExitPeerReadsPostedDataThenEnd) {
  Watchdog dog(40);
  constexpr uint64_t kBulk = 6u << 20;
  uint16_t port = 0;
  const int lfd = SanListener(&port);
  ASSERT_GE(lfd, 0);
  Channel done_ch;
  Child writer([&]() -> int {
    const int fd = ConnectShm(port);
    if (fd < 0) return -fd;
    SetNoDelay(fd);
    if (SendPattern(fd, 0, kBulk) != kBulk) return kSendFailed;
    done_ch.Put(1);
    _exit(0);
  });
  const int c = san_accept(lfd, nullptr, nullptr);
  ASSERT_GE(c, 0);
  ASSERT_TRUE(IsShm(c));
  // Leave less than a window unread (delayed ACKs hold back up to 15 credits) so the writer can
  // post everything and reach _exit().
  ReadResult head = ReadPattern(c, 0, kBulk - (512u << 10));
  ASSERT_EQ(head.bytes, kBulk - (512u << 10));
  int done = 0;
  ASSERT_TRUE(done_ch.Get(&done, 10000));
  EXPECT_EQ(writer.WaitCode(10000), 0);
  const uint64_t t0 = NowMs();
  const ReadResult rest = ReadPattern(c, head.bytes);
  EXPECT_FALSE(rest.corrupt);
  EXPECT_EQ(head.bytes + rest.bytes, kBulk) << "posted bytes lost";
  EXPECT_TRUE(rest.end == 0 || rest.end == ECONNRESET) << strerror(rest.end);
  EXPECT_LT(NowMs() - t0, 5000u);
  san_close(c);
  san_close(lfd);
}

}  // namespace
}  // namespace san::testing
