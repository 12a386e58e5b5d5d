// Fallback to kernel TCP: a SAN socket whose peer is not sanlib must still work, in either
// direction, and say why it is plain TCP (DESIGN.md "Both sides fall back").
//
//   (a) sanlib client -> plain kernel TCP server (a thread here, libc calls)
//   (b) plain kernel TCP client (a thread here) -> sanlib server
//   (c) real tools nobody here wrote: socat as an echo server for a sanlib client, and socat as a
//       client (upload, and full duplex through its stdio) of a sanlib server; 4 MiB, checksummed
//   (d) SAN_PROVIDER=off: this binary re-executed with the variable set; both ends of a sanlib
//       connection are TCP with that reason, and data flows
//
// socat is required, not optional: if it is missing the socat cases FAIL (CI installs it).
// Every wait is bounded: polls with timeouts, connect retries with a deadline, a watchdog per case,
// and spawned tools are killed and reaped at the end of the case whatever happened.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/inet.h"
#include "support/process.h"
#include "support/program.h"

#include "san/san.h"

namespace {

using san::testing_support::FindProgram;
using san::testing_support::Loopback;
using san::testing_support::PortOf;
using san::testing_support::Program;
using san::testing_support::ProgramSpec;

constexpr size_t kBulk = 4u << 20;  // bytes each way in the bulk cases
constexpr int kWaitMs = 10000;      // bound on any single wait for the peer

// ---------------------------------------------------------------------------------------------
// Data: a position-dependent pattern (a shifted or dropped byte shows) and a checksum.

uint8_t PatternByte(size_t i, uint8_t seed) {
  return static_cast<uint8_t>((i * 131 + seed) ^ (i >> 11));
}

std::vector<uint8_t> MakePattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = PatternByte(i, seed);
  return v;
}

// FNV-1a, 64 bit.
uint64_t Checksum(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
uint64_t Checksum(const std::vector<uint8_t>& v) { return Checksum(v.data(), v.size()); }

// ---------------------------------------------------------------------------------------------
// Transfers over any fd, through a pair of send/recv functions (sanlib's or libc's). Bounded: a
// poll with a timeout before every call.

using SendFn = ssize_t (*)(int, const void*, size_t, int);
using RecvFn = ssize_t (*)(int, void*, size_t, int);
using PollFn = int (*)(pollfd*, nfds_t, int);

ssize_t LibcSend(int fd, const void* b, size_t n, int flags) { return ::send(fd, b, n, flags); }
ssize_t LibcRecv(int fd, void* b, size_t n, int flags) { return ::recv(fd, b, n, flags); }
int LibcPoll(pollfd* f, nfds_t n, int t) { return ::poll(f, n, t); }

struct Io {
  SendFn send;
  RecvFn recv;
  PollFn poll;
};
const Io kSanIo{san_send, san_recv, san_poll};
const Io kLibcIo{LibcSend, LibcRecv, LibcPoll};

// Sends all of `data`; false (with a message in *why) on error or a stalled peer.
bool SendAll(const Io& io, int fd, const uint8_t* data, size_t n, std::string* why) {
  size_t done = 0;
  while (done < n) {
    pollfd p{fd, POLLOUT, 0};
    if (io.poll(&p, 1, kWaitMs) != 1) {
      *why = "peer stopped reading after " + std::to_string(done) + " bytes";
      return false;
    }
    ssize_t w = io.send(fd, data + done, std::min<size_t>(n - done, 256 * 1024),
                        MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (w <= 0) {
      *why = std::string("send: ") + strerror(errno) + " after " + std::to_string(done);
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return true;
}

// Receives until EOF or `max` bytes; false on error or silence.
bool RecvUpTo(const Io& io, int fd, size_t max, bool until_eof, std::vector<uint8_t>* out,
              std::string* why) {
  std::vector<uint8_t> buf(256 * 1024);
  for (;;) {
    if (!until_eof && out->size() >= max) return true;
    pollfd p{fd, POLLIN, 0};
    if (io.poll(&p, 1, kWaitMs) != 1) {
      *why = "peer went silent after " + std::to_string(out->size()) + " bytes";
      return false;
    }
    const size_t want = until_eof ? buf.size() : std::min(buf.size(), max - out->size());
    ssize_t r = io.recv(fd, buf.data(), want, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r < 0) {
      *why = std::string("recv: ") + strerror(errno) + " after " + std::to_string(out->size());
      return false;
    }
    if (r == 0) {
      if (until_eof) return true;
      *why = "EOF after " + std::to_string(out->size()) + " of " + std::to_string(max);
      return false;
    }
    out->insert(out->end(), buf.data(), buf.data() + r);
    if (out->size() > max) {
      *why = "more bytes than were sent";
      return false;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sockets.

int KernelListener(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = Loopback(0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 8) != 0) {
    return -1;
  }
  *port = PortOf(fd);
  return fd;
}

int SanListener(uint16_t* port) {
  int fd = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
  sockaddr_in a = Loopback(0);
  if (fd < 0 || san_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      san_listen(fd, 8) != 0) {
    return -1;
  }
  *port = PortOf(fd);
  return fd;
}

// A port that was free a moment ago (for tools that must be told which port to listen on).
uint16_t FreePort() {
  uint16_t port = 0;
  int fd = KernelListener(&port);
  if (fd >= 0) ::close(fd);
  return port;
}

// Connects a new SAN socket, retrying while the port is not listening yet (bounded).
int SanConnectRetrying(uint16_t port, int max_wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_wait_ms);
  for (;;) {
    int fd = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a = Loopback(port);
    if (san_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    const int err = errno;
    san_close(fd);
    if (err != ECONNREFUSED || std::chrono::steady_clock::now() >= deadline) {
      errno = err;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// san_accept, bounded by a poll on the listener.
int SanAcceptWithin(int lfd, int timeout_ms) {
  pollfd p{lfd, POLLIN, 0};
  if (san_poll(&p, 1, timeout_ms) != 1) return -1;
  return san_accept(lfd, nullptr, nullptr);
}

san_info InfoOf(int fd) {
  san_info info{};
  EXPECT_EQ(san_getinfo(fd, &info), 0) << strerror(errno);
  return info;
}

// ---------------------------------------------------------------------------------------------
// Spawned tools (support/program.h): stopped at the end with SIGTERM, SIGKILL after 3 s.

// `argv` (argv[0] a path) with stdin/stdout from/to the given files ("" = inherit) and
// `extra_env` ("NAME=value") added to this process's environment.
ProgramSpec Tool(const std::vector<std::string>& argv, const std::string& stdin_path = "",
                 const std::string& stdout_path = "",
                 const std::vector<std::string>& extra_env = {}) {
  ProgramSpec spec;
  spec.argv = argv;
  spec.env = extra_env;
  spec.stdin_path = stdin_path;
  spec.stdout_path = stdout_path;
  spec.stop_signal = SIGTERM;
  spec.stop_timeout_ms = 3000;
  return spec;
}

std::string ExitText(int status) {
  if (status == -1) return "did not exit in time";
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// A scratch directory for files the tools read and write, removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/san_fallback_XXXXXX";
    if (mkdtemp(tmpl)) path_ = tmpl;
  }
  ~ScratchDir() {
    for (const std::string& f : files_) unlink(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  std::string File(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

bool WriteFile(const std::string& path, const std::vector<uint8_t>& data) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = fwrite(data.data(), 1, data.size(), f) == data.size();
  return fclose(f) == 0 && ok;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::vector<uint8_t> data;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return data;
  uint8_t buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
  fclose(f);
  return data;
}

// socat, or a failure saying it is missing (the cases that need it must not pass without it).
std::string Socat() { return FindProgram("socat"); }
#define REQUIRE_SOCAT(var)                                                                        \
  const std::string var = Socat();                                                                \
  if (var.empty()) {                                                                              \
    GTEST_FAIL() << "socat is not installed (apt-get install -y socat): the fallback tests need " \
                    "it as a plain-TCP peer nobody here wrote";                                   \
  }

// ---------------------------------------------------------------------------------------------
// The fixture: SIGPIPE off (a dead peer must fail a send, not kill the run) and a watchdog.

extern "C" void OnWatchdog(int) {
  static const char kMsg[] = "\nfallback_test: a case hung past its watchdog\n";
  [[maybe_unused]] ssize_t rc = write(2, kMsg, sizeof kMsg - 1);
  _exit(124);
}

class Fallback : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, &OnWatchdog);
    alarm(90);
  }
  void TearDown() override { alarm(0); }
};

// ---------------------------------------------------------------------------------------------
// (a) sanlib client -> plain kernel TCP server.

TEST_F(Fallback, SanClientToKernelServer) {
  uint16_t port = 0;
  const int lfd = KernelListener(&port);
  ASSERT_GE(lfd, 0) << strerror(errno);
  const std::vector<uint8_t> up = MakePattern(kBulk, 1);
  const std::vector<uint8_t> down = MakePattern(kBulk, 2);
  std::string server_error;
  uint64_t server_got_sum = 0;
  size_t server_got = 0;
  std::thread server([&] {
    // Plain libc: read everything until EOF, then answer with our own bytes and close.
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, kWaitMs) != 1) {
      server_error = "no connection";
      return;
    }
    const int c = ::accept(lfd, nullptr, nullptr);
    if (c < 0) {
      server_error = std::string("accept: ") + strerror(errno);
      return;
    }
    std::vector<uint8_t> got;
    if (RecvUpTo(kLibcIo, c, kBulk, true, &got, &server_error)) {
      server_got = got.size();
      server_got_sum = Checksum(got);
      SendAll(kLibcIo, c, down.data(), down.size(), &server_error);
    }
    ::close(c);
  });
  const int fd = SanConnectRetrying(port, kWaitMs);
  ASSERT_GE(fd, 0) << strerror(errno);
  const san_info info = InfoOf(fd);
  EXPECT_EQ(info.mode, SAN_MODE_TCP);
  EXPECT_NE(strstr(info.fallback, "no SAN listener"), nullptr) << "reason: " << info.fallback;
  std::string why;
  EXPECT_TRUE(SendAll(kSanIo, fd, up.data(), up.size(), &why)) << why;
  ASSERT_EQ(san_shutdown(fd, SHUT_WR), 0) << strerror(errno);
  std::vector<uint8_t> got;
  EXPECT_TRUE(RecvUpTo(kSanIo, fd, kBulk, true, &got, &why)) << why;
  server.join();
  EXPECT_EQ(server_error, "");
  EXPECT_EQ(server_got, up.size());
  EXPECT_EQ(server_got_sum, Checksum(up)) << "bytes corrupted on the way to the server";
  EXPECT_EQ(got.size(), down.size());
  EXPECT_EQ(Checksum(got), Checksum(down)) << "bytes corrupted on the way back";
  EXPECT_EQ(InfoOf(fd).mode, SAN_MODE_TCP);
  EXPECT_EQ(san_close(fd), 0);
  ::close(lfd);
}

// (b) plain kernel TCP client -> sanlib server.

TEST_F(Fallback, KernelClientToSanServer) {
  uint16_t port = 0;
  const int lfd = SanListener(&port);
  ASSERT_GE(lfd, 0) << strerror(errno);
  const std::vector<uint8_t> up = MakePattern(kBulk, 3);
  const std::vector<uint8_t> down = MakePattern(kBulk, 4);
  std::string client_error;
  std::vector<uint8_t> client_got;
  std::thread client([&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      client_error = std::string("connect: ") + strerror(errno);
      ::close(fd);
      return;
    }
    if (SendAll(kLibcIo, fd, up.data(), up.size(), &client_error)) {
      ::shutdown(fd, SHUT_WR);
      RecvUpTo(kLibcIo, fd, kBulk, true, &client_got, &client_error);
    }
    ::close(fd);
  });
  const int c = SanAcceptWithin(lfd, kWaitMs);
  ASSERT_GE(c, 0) << strerror(errno);
  const san_info info = InfoOf(c);
  EXPECT_EQ(info.mode, SAN_MODE_TCP);
  EXPECT_NE(strstr(info.fallback, "did not set up a SAN channel"), nullptr)
      << "reason: " << info.fallback;
  std::string why;
  std::vector<uint8_t> got;
  EXPECT_TRUE(RecvUpTo(kSanIo, c, kBulk, true, &got, &why)) << why;
  EXPECT_EQ(got.size(), up.size());
  EXPECT_EQ(Checksum(got), Checksum(up)) << "bytes corrupted on the way to the server";
  EXPECT_TRUE(SendAll(kSanIo, c, down.data(), down.size(), &why)) << why;
  EXPECT_EQ(san_close(c), 0);
  client.join();
  EXPECT_EQ(client_error, "");
  EXPECT_EQ(client_got.size(), down.size());
  EXPECT_EQ(Checksum(client_got), Checksum(down)) << "bytes corrupted on the way back";
  san_close(lfd);
}

// (b2) A SAN listen() that the kernel refuses (EADDRINUSE: a plain server listens on the port
// both sockets were bound to with SO_REUSEADDR) leaves no rendezvous behind: sanlib opens a
// bound socket's rendezvous before the kernel's listen() (docs/sockets.md "Listen: the rendezvous
// first"), and a rendezvous left open would hand a SAN client a channel to nobody while the plain
// server accepted its TCP connection.
TEST_F(Fallback, RefusedSanListenLeavesNoRendezvous) {
  const int one = 1;
  const int plain = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(plain, 0) << strerror(errno);
  ASSERT_EQ(::setsockopt(plain, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  sockaddr_in a = Loopback(0);
  ASSERT_EQ(::bind(plain, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  const uint16_t port = PortOf(plain);
  a = Loopback(port);
  // The same on the kernel's own socket and on a SAN one: bound, then listen() refused.
  int errors[2] = {0, 0};
  const int fds[2] = {::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0),
                      san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0)};
  ASSERT_GE(fds[0], 0) << strerror(errno);
  ASSERT_GE(fds[1], 0) << strerror(errno);
  ASSERT_EQ(::setsockopt(fds[0], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  ASSERT_EQ(san_setsockopt(fds[1], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  ASSERT_EQ(::bind(fds[0], reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  ASSERT_EQ(san_bind(fds[1], reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  ASSERT_EQ(::listen(plain, 8), 0) << strerror(errno);
  EXPECT_EQ(::listen(fds[0], 8), -1);
  errors[0] = errno;
  EXPECT_EQ(san_listen(fds[1], 8), -1);
  errors[1] = errno;
  EXPECT_EQ(errors[0], EADDRINUSE) << strerror(errors[0]);
  EXPECT_EQ(errors[1], errors[0]) << "san_listen: " << strerror(errors[1]);
  // A SAN client reaches the plain server over kernel TCP, told so, and its bytes go through.
  const int fd = SanConnectRetrying(port, kWaitMs);
  ASSERT_GE(fd, 0) << strerror(errno);
  const san_info info = InfoOf(fd);
  EXPECT_EQ(info.mode, SAN_MODE_TCP);
  EXPECT_NE(strstr(info.fallback, "no SAN listener"), nullptr) << "reason: " << info.fallback;
  const int c = ::accept(plain, nullptr, nullptr);
  ASSERT_GE(c, 0) << strerror(errno);
  std::string why;
  const uint8_t ping[] = {'p', 'i', 'n', 'g'};
  EXPECT_TRUE(SendAll(kSanIo, fd, ping, sizeof ping, &why)) << why;
  std::vector<uint8_t> got;
  EXPECT_TRUE(RecvUpTo(kLibcIo, c, 4, false, &got, &why)) << why;
  EXPECT_EQ(std::string(got.begin(), got.end()), "ping");
  ::close(c);
  san_close(fd);
  // Once the plain server is gone, listen() again on the same socket succeeds and serves SAN
  // clients over shm: the failed one left nothing half set up.
  ::close(plain);
  ::close(fds[0]);
  ASSERT_EQ(san_listen(fds[1], 8), 0) << strerror(errno);
  const int again = SanConnectRetrying(port, kWaitMs);
  ASSERT_GE(again, 0) << strerror(errno);
  EXPECT_EQ(InfoOf(again).mode, SAN_MODE_SHM) << "reason: " << InfoOf(again).fallback;
  const int served = SanAcceptWithin(fds[1], kWaitMs);
  ASSERT_GE(served, 0) << strerror(errno);
  EXPECT_EQ(InfoOf(served).mode, SAN_MODE_SHM) << "reason: " << InfoOf(served).fallback;
  EXPECT_TRUE(SendAll(kSanIo, again, ping, sizeof ping, &why)) << why;
  got.clear();
  EXPECT_TRUE(RecvUpTo(kSanIo, served, 4, false, &got, &why)) << why;
  EXPECT_EQ(std::string(got.begin(), got.end()), "ping");
  san_close(served);
  san_close(again);
  san_close(fds[1]);
}

// (c) socat.

// socat as an echo server (TCP-LISTEN + EXEC:cat) for a sanlib client: full duplex, a reader
// thread draining the echo while the main thread sends.
TEST_F(Fallback, SocatEchoServerForSanClient) {
  REQUIRE_SOCAT(socat);
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  Program tool;
  ASSERT_TRUE(tool.Start(Tool({socat, "-T", "30",
                               "TCP-LISTEN:" + std::to_string(port) + ",bind=127.0.0.1,reuseaddr",
                               "EXEC:cat"})))
      << tool.error();
  // Bounded wait for its port: connect refused until socat listens.
  const int fd = SanConnectRetrying(port, kWaitMs);
  ASSERT_GE(fd, 0) << "socat never listened on " << port << ": " << strerror(errno);
  const san_info info = InfoOf(fd);
  EXPECT_EQ(info.mode, SAN_MODE_TCP);
  EXPECT_NE(strstr(info.fallback, "no SAN listener"), nullptr) << "reason: " << info.fallback;
  const std::vector<uint8_t> out = MakePattern(kBulk, 5);
  std::vector<uint8_t> echoed;
  std::string reader_error;
  std::thread reader([&] { RecvUpTo(kSanIo, fd, kBulk, false, &echoed, &reader_error); });
  std::string why;
  EXPECT_TRUE(SendAll(kSanIo, fd, out.data(), out.size(), &why)) << why;
  reader.join();
  EXPECT_EQ(reader_error, "");
  EXPECT_EQ(echoed.size(), out.size());
  EXPECT_EQ(Checksum(echoed), Checksum(out)) << "echo differs from what was sent";
  // Our FIN: cat sees EOF, socat closes, we see EOF.
  ASSERT_EQ(san_shutdown(fd, SHUT_WR), 0);
  std::vector<uint8_t> rest;
  EXPECT_TRUE(RecvUpTo(kSanIo, fd, 0, true, &rest, &why)) << why;
  EXPECT_TRUE(rest.empty());
  const san_info end = InfoOf(fd);
  EXPECT_EQ(end.mode, SAN_MODE_TCP);
  EXPECT_EQ(san_close(fd), 0);
  const int status = tool.WaitStatus(kWaitMs);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "socat: " << ExitText(status);
}

// socat as a client uploading a file (-u FILE:... TCP:...) to a sanlib server.
TEST_F(Fallback, SocatUploadToSanServer) {
  REQUIRE_SOCAT(socat);
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<uint8_t> data = MakePattern(kBulk, 6);
  const std::string in = dir.File("upload.bin");
  ASSERT_TRUE(WriteFile(in, data));
  uint16_t port = 0;
  const int lfd = SanListener(&port);
  ASSERT_GE(lfd, 0) << strerror(errno);
  Program tool;
  ASSERT_TRUE(tool.Start(Tool({socat, "-u", "FILE:" + in, "TCP:127.0.0.1:" + std::to_string(port)})))
      << tool.error();
  const int c = SanAcceptWithin(lfd, kWaitMs);
  ASSERT_GE(c, 0) << "socat never connected";
  const san_info info = InfoOf(c);
  EXPECT_EQ(info.mode, SAN_MODE_TCP);
  EXPECT_NE(strstr(info.fallback, "did not set up a SAN channel"), nullptr)
      << "reason: " << info.fallback;
  std::vector<uint8_t> got;
  std::string why;
  EXPECT_TRUE(RecvUpTo(kSanIo, c, kBulk, true, &got, &why)) << why;
  EXPECT_EQ(got.size(), data.size());
  EXPECT_EQ(Checksum(got), Checksum(data)) << "upload corrupted";
  EXPECT_EQ(san_close(c), 0);
  const int status = tool.WaitStatus(kWaitMs);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "socat: " << ExitText(status);
  san_close(lfd);
}

// socat as a full-duplex client (stdio <-> TCP) of a sanlib echo server: its stdin is a file, its
// stdout another; what comes back must be what went out.
TEST_F(Fallback, SocatDuplexClientOfSanEchoServer) {
  REQUIRE_SOCAT(socat);
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<uint8_t> data = MakePattern(kBulk, 7);
  const std::string in = dir.File("in.bin");
  const std::string out = dir.File("out.bin");
  ASSERT_TRUE(WriteFile(in, data));
  uint16_t port = 0;
  const int lfd = SanListener(&port);
  ASSERT_GE(lfd, 0) << strerror(errno);
  Program tool;
  // -t: after stdin's EOF, how long socat keeps reading the echo (it stops early at our EOF).
  ASSERT_TRUE(
      tool.Start(Tool({socat, "-t", "20", "-", "TCP:127.0.0.1:" + std::to_string(port)}, in, out)))
      << tool.error();
  const int c = SanAcceptWithin(lfd, kWaitMs);
  ASSERT_GE(c, 0) << "socat never connected";
  EXPECT_EQ(InfoOf(c).mode, SAN_MODE_TCP);
  // Echo until the client's EOF, then close.
  std::vector<uint8_t> buf(128 * 1024);
  uint64_t echoed = 0;
  std::string why;
  for (;;) {
    pollfd p{c, POLLIN, 0};
    ASSERT_EQ(san_poll(&p, 1, kWaitMs), 1) << "socat went silent after " << echoed;
    ssize_t n = san_recv(c, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) continue;
    ASSERT_GE(n, 0) << strerror(errno);
    if (n == 0) break;
    ASSERT_TRUE(SendAll(kSanIo, c, buf.data(), static_cast<size_t>(n), &why)) << why;
    echoed += static_cast<uint64_t>(n);
  }
  EXPECT_EQ(echoed, data.size());
  EXPECT_EQ(san_close(c), 0);
  const int status = tool.WaitStatus(kWaitMs);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "socat: " << ExitText(status);
  const std::vector<uint8_t> back = ReadFile(out);
  EXPECT_EQ(back.size(), data.size());
  EXPECT_EQ(Checksum(back), Checksum(data)) << "echo through socat corrupted";
  san_close(lfd);
}

// (d) SAN_PROVIDER=off. The variable is read once per process, so the case re-executes this
// binary with it set, running only itself; the child instance (marked by kChildMark) does the
// work: a sanlib listener and a sanlib client, both TCP with reason "SAN_PROVIDER=off".

constexpr char kChildMark[] = "SAN_FALLBACK_TEST_PROVIDER_OFF_CHILD";

void ProviderOffChild() {
  ASSERT_STREQ(getenv("SAN_PROVIDER"), "off");
  uint16_t port = 0;
  const int lfd = SanListener(&port);
  ASSERT_GE(lfd, 0) << strerror(errno);
  const int fd = SanConnectRetrying(port, kWaitMs);
  ASSERT_GE(fd, 0) << strerror(errno);
  const int c = SanAcceptWithin(lfd, kWaitMs);
  ASSERT_GE(c, 0) << strerror(errno);
  for (int s : {fd, c}) {
    const san_info info = InfoOf(s);
    EXPECT_EQ(info.mode, SAN_MODE_TCP) << "fd " << s;
    EXPECT_STREQ(info.fallback, "SAN_PROVIDER=off") << "fd " << s;
  }
  const std::vector<uint8_t> up = MakePattern(kBulk, 8);
  const std::vector<uint8_t> down = MakePattern(kBulk, 9);
  std::string up_error;
  std::vector<uint8_t> up_got;
  std::thread server([&] {
    if (RecvUpTo(kSanIo, c, kBulk, false, &up_got, &up_error)) {
      SendAll(kSanIo, c, down.data(), down.size(), &up_error);
    }
  });
  std::string why;
  EXPECT_TRUE(SendAll(kSanIo, fd, up.data(), up.size(), &why)) << why;
  std::vector<uint8_t> got;
  EXPECT_TRUE(RecvUpTo(kSanIo, fd, kBulk, false, &got, &why)) << why;
  server.join();
  EXPECT_EQ(up_error, "");
  EXPECT_EQ(Checksum(up_got), Checksum(up));
  EXPECT_EQ(Checksum(got), Checksum(down));
  san_close(fd);
  san_close(c);
  san_close(lfd);
}

TEST_F(Fallback, ProviderOffMeansKernelTcp) {
  if (getenv(kChildMark)) {
    ProviderOffChild();
    return;
  }
  const std::string self = [] {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }();
  ASSERT_FALSE(self.empty());
  const ::testing::TestInfo* me = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + me->test_suite_name() + "." + me->name();
  Program child;
  // The variables replace any inherited SAN_PROVIDER.
  ASSERT_TRUE(child.Start(
      Tool({self, filter}, "", "", {"SAN_PROVIDER=off", std::string(kChildMark) + "=1"})))
      << child.error();
  const int status = child.WaitStatus(60000);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child run with SAN_PROVIDER=off: " << ExitText(status) << " (its output is above)";
}

}  // namespace
