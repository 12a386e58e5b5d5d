// exec() and SAN connections (socket/exec_handoff.h, compat/interpose_exec.cc): a connection a
// new image inherits either re-attaches (same shm stream, byte-exact both ways) or the new image
// gets a reset socket -- never a kernel connection whose peer reads elsewhere.
//
// This process is the SAN peer (linked with libsan_compat); the exec'ing side is real programs
// under sanrun: bash opens the connection (/dev/tcp, through the interposed socket/connect) and
// execs cat, sh or true with it. Children are started with posix_spawn (no fork of this
// multithreaded process: see .ci/run on ASan and fork). The failed-exec cases run in this process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compat/real_programs.h"
#include "san/san.h"
#include "support/inet.h"

namespace san::testing_support {
namespace {

constexpr int kWaitMs = 10000;

std::string TempPath(const std::string& name) {
  const char* dir = getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/san_exec_" + std::to_string(getpid()) + "_" +
         name;
}

// A program (support/program.h) with `extra_env` added and its output in `log`; killed and
// reaped if the test ends first. The log is removed unless the test failed (kept for diagnosis).
class Spawned : public Program {
 public:
  Spawned(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
          const std::string& log)
      : log_(log) {
    ProgramSpec spec;
    spec.argv = argv;
    spec.env = extra_env;
    spec.stdout_path = spec.stderr_path = log;
    if (!Start(spec)) ADD_FAILURE() << error();
  }
  ~Spawned() {
    Kill();
    if (!::testing::Test::HasFailure()) unlink(log_.c_str());
  }

 private:
  std::string log_;
};

std::vector<char> Pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (char& c : v) c = static_cast<char>(rng());
  return v;
}

bool WaitReadable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

// Reads until `want` bytes, EOF or an error; each wait bounded. Returns bytes read; *err the
// errno of the read that ended it (0 for EOF or enough).
std::vector<char> ReadUpTo(int fd, size_t want, int* err) {
  std::vector<char> got;
  *err = 0;
  char buf[65536];
  while (got.size() < want) {
    if (!WaitReadable(fd, kWaitMs)) {
      *err = ETIMEDOUT;
      break;
    }
    const ssize_t n = read(fd, buf, std::min(sizeof buf, want - got.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *err = n < 0 ? errno : 0;
      break;
    }
    got.insert(got.end(), buf, buf + n);
  }
  return got;
}

// A SAN listener of this process on 127.0.0.1 (close-on-exec: children must not inherit it).
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(0);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 8), 0);
    port_ = PortOf(fd_);
  }
  ~Listener() { close(fd_); }
  uint16_t port() const { return port_; }
  // The next connection, or -1 after the timeout.
  int Accept() {
    if (!WaitReadable(fd_, kWaitMs)) return -1;
    return accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

int ModeOf(int fd) {
  san_info info{};
  return san_getinfo(fd, &info) == 0 ? info.mode : -1;
}

// `eager`: the channel is made in connect() (SAN_SETUP=eager), so what the exec hands over is a
// shm connection; else sanrun's default, late (the connection starts on kernel TCP).
std::vector<std::string> UnderSanrun(const std::string& script, bool eager = true) {
  if (!eager) return {SAN_SANRUN, "--", "bash", "-c", script};
  return {SAN_SANRUN, "--set", "SAN_SETUP=eager", "--", "bash", "-c", script};
}

std::string Connect3(uint16_t port) {
  return "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + "; ";
}

// Sends `data` and reads as many bytes back, interleaved on one thread (nonblocking, poll): the
// echo both ways, byte-exact. (One thread: a writer and a reader thread sleeping on the same SAN
// socket can miss a wake-up, a socket-layer race outside this test's subject.)
void ExpectEcho(int fd, const std::vector<char>& data) {
  const int flags = fcntl(fd, F_GETFL);
  ASSERT_EQ(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
  std::vector<char> back;
  size_t sent = 0;
  char buf[65536];
  while (back.size() < data.size()) {
    pollfd p{fd, static_cast<short>(POLLIN | (sent < data.size() ? POLLOUT : 0)), 0};
    ASSERT_EQ(poll(&p, 1, kWaitMs), 1) << "echo stalled: sent " << sent << ", back " << back.size();
    if ((p.revents & POLLOUT) && sent < data.size()) {
      const ssize_t n = write(fd, data.data() + sent, std::min<size_t>(65536, data.size() - sent));
      if (n > 0) sent += static_cast<size_t>(n);
      ASSERT_TRUE(n > 0 || errno == EAGAIN) << "write: " << strerror(errno);
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = read(fd, buf, sizeof buf);
      ASSERT_TRUE(n > 0 || (n < 0 && errno == EAGAIN))
          << "echo ended early after " << back.size() << ": " << (n == 0 ? "EOF" : strerror(errno));
      if (n > 0) back.insert(back.end(), buf, buf + n);
    }
  }
  ASSERT_EQ(fcntl(fd, F_SETFL, flags), 0);
  EXPECT_TRUE(back == data) << "echoed bytes differ";
}

// What the connection an exec'd cat inherited becomes.
enum class Outcome {
  kReattached,  // cat loads the layer: the same shm stream, in cat
  kMovedToTcp,  // cat does not: both ends continue over the kernel socket (socket/tcp_move.h)
  kLate,        // sanrun's default set-up: a kernel TCP connection at the exec; any mode after
};

// The echo through an exec'd cat, then our EOF ends it and cat's EOF reaches us. We are active
// throughout (ExpectEcho polls), so when the connection moves to TCP our side answers the move,
// and what we sent before the exec that bash never read comes back to us and goes out again over
// TCP to cat.
void RunEchoCase(const std::string& script_after_connect, const std::string& name,
                 Outcome outcome = Outcome::kReattached) {
  signal(SIGPIPE, SIG_IGN);  // a peer that went away is an error to report, not a death
  Listener listener;
  const std::string report = TempPath(name + ".report");
  unlink(report.c_str());
  Spawned client(
      UnderSanrun(Connect3(listener.port()) + script_after_connect, outcome != Outcome::kLate),
      {"SAN_REPORT=" + report}, TempPath(name + ".log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  if (outcome != Outcome::kLate) {
    // On shm; or, when the exec into an image without the layer came first (a loaded machine
    // delays us), already moved: our first call answered the MOVE, which says so.
    san_info start{};
    ASSERT_EQ(san_getinfo(fd, &start), 0);
    const bool moved_first = outcome == Outcome::kMovedToTcp && start.mode == SAN_MODE_TCP &&
                             std::strstr(start.fallback, "moved the connection to kernel TCP");
    ASSERT_TRUE(start.mode == SAN_MODE_SHM || moved_first)
        << "the connection did not start on shm: " << start.fallback;
  }
  const std::vector<char> data = Pattern(1u << 20, 7);
  ExpectEcho(fd, data);
  ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
  int err = 0;
  EXPECT_TRUE(ReadUpTo(fd, 1, &err).empty());
  EXPECT_EQ(err, 0) << "expected cat's EOF: " << strerror(err);
  san_info info{};
  ASSERT_EQ(san_getinfo(fd, &info), 0);
  close(fd);
  EXPECT_EQ(client.Wait(kWaitMs), 0) << client.Output();
  if (outcome == Outcome::kLate) {
    // The echo above was byte-exact and ended with cat's EOF, whichever way the bytes went.
  } else if (outcome == Outcome::kMovedToTcp) {
    EXPECT_EQ(info.mode, SAN_MODE_TCP);
    EXPECT_NE(std::string(info.fallback).find("peer moved"), std::string::npos) << info.fallback;
  } else {
    EXPECT_EQ(info.mode, SAN_MODE_SHM);
    // cat itself moved the bytes over shm: the connection it inherited re-attached.
    const Usage cat = UsageOf(report, "cat");
    EXPECT_EQ(cat.shm_connections, 1u) << client.Output();
    EXPECT_EQ(cat.shm_bytes_received, data.size());
    EXPECT_EQ(cat.shm_bytes_sent, data.size());
    EXPECT_EQ(cat.tcp_connections, 0u);
  }
  unlink(report.c_str());
}

// `sanrun bash -c 'exec 3<>/dev/tcp/...; exec cat <&3 >&3'`: bash's own connection, its stdin
// and stdout made dups of it, exec'd into a preloaded cat.
TEST(ExecTest, PreloadedImageReattachesAndStaysShm) { RunEchoCase("exec cat <&3 >&3", "reattach"); }

// inetd style: fork, dup2 the socket onto 0 and 1, exec; the parent closes its copy (the exec
// waits for that, bounded, since the socket is on stdio).
TEST(ExecTest, InetdStyleForkDup2Exec) {
  RunEchoCase("(exec cat <&3 >&3) & exec 3>&-; wait", "inetd");
}

// The same two under sanrun's default, the late set-up: the exec finds a kernel TCP connection
// (or, if it lived long enough, a shm one), and the echo through cat is byte-exact either way.
TEST(ExecTest, PreloadedImageUnderLateSetUp) {
  RunEchoCase("exec cat <&3 >&3", "reattach-late", Outcome::kLate);
}
TEST(ExecTest, InetdStyleForkDup2ExecUnderLateSetUp) {
  RunEchoCase("(exec cat <&3 >&3) & exec 3>&-; wait", "inetd-late", Outcome::kLate);
}
TEST(ExecTest, ExecAfterTheMoveUnderLateSetUp) {
  RunEchoCase("sleep 0.2; exec cat <&3 >&3", "moved-late", Outcome::kLate);
}

// An image that does not load the layer uses the kernel socket itself: the connection moves to
// kernel TCP on both ends, and our socket ends up in kernel TCP mode saying why.
TEST(ExecTest, ImageWithoutLayerContinuesOverTcp) {
  RunEchoCase("LD_PRELOAD= exec cat <&3 >&3", "plain-cat", Outcome::kMovedToTcp);
}

// A static program cannot load the layer whatever LD_PRELOAD says (compat/exec_target.h).
TEST(ExecTest, StaticImageContinuesOverTcp) {
  if (access("/bin/busybox", X_OK) != 0) GTEST_SKIP() << "/bin/busybox (busybox-static) missing";
  RunEchoCase("exec /bin/busybox cat <&3 >&3", "static-cat", Outcome::kMovedToTcp);
}

// The same image with a peer that takes no call on the socket within the move's wait (we only
// read after the client is done): the move cannot complete, and the image must not get a kernel
// connection nobody reads: its write fails and its read ends, and we never see a byte of it.
// The client execs only once we are done with our calls (the file `go` exists): a call of ours
// after its MOVE arrived would answer it (on a loaded machine our accept() and san_getinfo came
// after the exec, 1 run in 2 with both CPUs busy).
TEST(ExecTest, ImageWithoutLayerAndSilentPeerGetsResetSocketNeverData) {
  Listener listener;
  const std::string go = TempPath("plain.go");
  unlink(go.c_str());
  Spawned client(
      UnderSanrun(Connect3(listener.port()) + "for i in $(seq 1000); do [ -e " + go +
                  " ] && break; sleep 0.01; done; "
                  "LD_PRELOAD= exec sh -c 'trap \"\" PIPE; "
                  "if echo not-for-you >&3; then echo WROTE; else echo WRITE-FAILED; fi; "
                  "cat <&3; echo READ-ENDED'"),
      {}, TempPath("plain.log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  ASSERT_EQ(ModeOf(fd), SAN_MODE_SHM);
  const int made = open(go.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(made, 0);
  close(made);
  EXPECT_EQ(client.Wait(kWaitMs), 0) << client.Output();
  unlink(go.c_str());
  const std::string log = client.Output();
  EXPECT_NE(log.find("WRITE-FAILED"), std::string::npos) << log;
  EXPECT_EQ(log.find("WROTE"), std::string::npos) << log;
  EXPECT_NE(log.find("READ-ENDED"), std::string::npos) << log;
  // Our side: the connection ended (EOF or reset), with no data.
  int err = 0;
  const std::vector<char> got = ReadUpTo(fd, 1, &err);
  EXPECT_TRUE(got.empty()) << "received bytes from an image that cannot speak SAN";
  EXPECT_TRUE(err == 0 || err == ECONNRESET || err == EPIPE) << strerror(err);
  close(fd);
}

// Another process (the parent shell) keeps the connection: the exec'd child cannot take it and
// gets the reset socket (cat fails), and the connection carries on, untouched, for the parent,
// which reads what we sent meanwhile (bash's read builtin: read(2) on fd 3) and exits 0 on a match.
TEST(ExecTest, SharedConnectionStaysWithTheOtherHolder) {
  Listener listener;
  Spawned client(UnderSanrun(Connect3(listener.port()) +
                             "if (exec cat <&3 >/dev/null) 2>/dev/null; then exit 3; fi; "
                             "read -r -u 3 line && [ \"$line\" = for-the-parent ]"),
                 {}, TempPath("shared.log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  ASSERT_EQ(ModeOf(fd), SAN_MODE_SHM);
  const std::string line = "for-the-parent\n";
  ASSERT_EQ(write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  EXPECT_EQ(client.Wait(kWaitMs), 0) << client.Output();
  int err = 0;
  EXPECT_TRUE(ReadUpTo(fd, 1, &err).empty());
  EXPECT_EQ(err, 0) << "expected the parent's EOF: " << strerror(err);
  EXPECT_EQ(ModeOf(fd), SAN_MODE_SHM);
  close(fd);
}

// A program that reads stdin and writes stdout through stdio (sed): the inherited connection on
// fd 0 and 1 is reached through stdin/stdout, and what sed buffers until exit still arrives
// before its FIN.
TEST(ExecTest, StdioProgramUsesInheritedConnection) {
  Listener listener;
  const std::string report = TempPath("stdio.report");
  unlink(report.c_str());
  Spawned client(UnderSanrun(Connect3(listener.port()) + "exec sed 's/^/echo: /' <&3 >&3"),
                 {"SAN_REPORT=" + report}, TempPath("stdio.log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  ASSERT_EQ(ModeOf(fd), SAN_MODE_SHM);
  const std::string text = "hello\nworld\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
  int err = 0;
  const std::vector<char> got = ReadUpTo(fd, 1 << 16, &err);
  EXPECT_EQ(std::string(got.begin(), got.end()), "echo: hello\necho: world\n");
  EXPECT_EQ(err, 0) << strerror(err);
  EXPECT_EQ(client.Wait(kWaitMs), 0) << client.Output();
  EXPECT_EQ(UsageOf(report, "sed").shm_connections, 1u);
  close(fd);
  unlink(report.c_str());
}

// `python3 -c` under sanrun (eager set-up: the connection is on shm from its start), the script
// `body` after a prologue that connects `var` to our listener on `port`.
std::vector<std::string> PythonConnected(uint16_t port, const std::string& var,
                                         const std::string& body) {
  const std::string script = "import os, socket, subprocess, sys\n" + var +
                             " = socket.create_connection(('127.0.0.1', " + std::to_string(port) +
                             "))\n" + body;
  return {SAN_SANRUN, "--set", "SAN_SETUP=eager", "--", "python3", "-c", script};
}

// All the program's numbers for the socket are close-on-exec (python's sockets are): the new
// image only closes it, and we read what was sent before the exec, then EOF -- not a reset.
TEST(ExecTest, CloseOnExecSocketEndsWithEof) {
  if (!Installed("python3")) GTEST_SKIP() << "python3 not installed";
  Listener listener;
  Spawned client(PythonConnected(listener.port(), "s",
                                 "s.sendall(b'sent-before-exec')\n"
                                 "os.execv('/bin/true', ['true'])\n"),
                 {}, TempPath("cloexec.log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  ASSERT_EQ(ModeOf(fd), SAN_MODE_SHM);
  int err = 0;
  const std::vector<char> got = ReadUpTo(fd, 1 << 16, &err);
  EXPECT_EQ(std::string(got.begin(), got.end()), "sent-before-exec");
  EXPECT_EQ(err, 0) << "expected EOF, got " << strerror(err);
  EXPECT_EQ(client.Wait(kWaitMs), 0) << client.Output();
  close(fd);
}

// Python's subprocess (3.10 on) starts children with vfork(): the child runs in the parent's
// memory, closes every fd it does not keep and dup2s stdin, then execs. Those calls reach the
// layer, and once changed sanlib's state under the parent: the child's close of the connection
// unmapped the parent's segment and sent our end a FIN, and the connection was reset (any python
// program under sanrun that ran a command in the middle of a connection). Now they are the
// kernel's alone (Runtime::InVforkChild): a child that does not inherit the connection leaves it
// on shm, byte-exact.
TEST(ExecTest, PythonSubprocessInTheMiddleOfAConnectionLeavesItWhole) {
  if (!Installed("python3")) GTEST_SKIP() << "python3 not installed";
  Listener listener;
  const std::string report = TempPath("vfork.report");
  unlink(report.c_str());
  const std::string script =
      "n, spawned = 0, False\n"
      "while True:\n"
      "    d = c.recv(65536)\n"
      "    if not d: break\n"
      "    c.sendall(d)\n"
      "    n += len(d)\n"
      "    if n >= 1 << 19 and not spawned:\n"
      "        spawned = True\n"
      "        subprocess.run(['/bin/true'], check=True)\n"
      "        subprocess.run(['/bin/cat'], stdin=subprocess.DEVNULL, check=True)\n"
      "c.close()\n";
  Spawned client(PythonConnected(listener.port(), "c", script), {"SAN_REPORT=" + report},
                 TempPath("vfork.log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  ASSERT_EQ(ModeOf(fd), SAN_MODE_SHM);
  const std::vector<char> data = Pattern(1u << 20, 11);
  ExpectEcho(fd, data);
  ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
  int err = 0;
  EXPECT_TRUE(ReadUpTo(fd, 1, &err).empty());
  EXPECT_EQ(err, 0) << "expected python's EOF: " << strerror(err);
  EXPECT_EQ(ModeOf(fd), SAN_MODE_SHM);
  close(fd);
  EXPECT_EQ(client.Wait(kWaitMs), 0) << client.Output();
  const Usage python = UsageOf(report, "python3");
  EXPECT_EQ(python.shm_connections, 1u) << client.Output();
  EXPECT_EQ(python.shm_bytes_received, data.size());
  EXPECT_EQ(python.shm_bytes_sent, data.size());
  unlink(report.c_str());
}

// Shuts our end's writing down and expects the program's EOF, then closes `fd` and expects the
// program to exit 0.
void ExpectEofThenExit(int fd, Spawned& client) {
  ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
  int err = 0;
  EXPECT_TRUE(ReadUpTo(fd, 1, &err).empty());
  EXPECT_EQ(err, 0) << "expected the program's EOF: " << strerror(err);
  close(fd);
  EXPECT_EQ(client.Wait(kWaitMs), 0) << client.Output();
}

// A python program (under sanrun, its connection on shm) echoes half of what we send, then hands
// the connection to a child that glibc starts and execs by itself: `spawn` (python code that runs
// `cat` on the connection `c` and sets `rc` to its exit status). cat echoes the rest until our
// EOF. Before compat/interpose_spawn.cc, cat read a kernel socket we never wrote to and the echo
// stalled; now the connection moves to kernel TCP on both ends before the spawn.
void ExpectSpawnedCatServesTheRest(const std::string& name, const std::string& spawn) {
  if (!Installed("python3")) GTEST_SKIP() << "python3 not installed";
  Listener listener;
  const std::string script =
      "n = 0\n"
      "while n < 1 << 19:\n"
      "    d = c.recv(65536)\n"
      "    if not d: sys.exit(4)\n"
      "    c.sendall(d)\n"
      "    n += len(d)\n" +
      spawn +
      "c.close()\n"
      "sys.exit(0 if rc == 0 else 5)\n";
  Spawned client(PythonConnected(listener.port(), "c", script), {}, TempPath(name + ".log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  ASSERT_EQ(ModeOf(fd), SAN_MODE_SHM);
  const std::vector<char> data = Pattern(1u << 20, 5);
  ASSERT_NO_FATAL_FAILURE(
      ExpectEcho(fd, std::vector<char>(data.begin(), data.begin() + (1 << 19))));
  ASSERT_NO_FATAL_FAILURE(ExpectEcho(fd, std::vector<char>(data.begin() + (1 << 19), data.end())));
  EXPECT_EQ(ModeOf(fd), SAN_MODE_TCP) << "the connection cat was given did not move";
  ExpectEofThenExit(fd, client);
}

TEST(ExecTest, PythonOsSystemChildServesTheConnection) {
  ExpectSpawnedCatServesTheRest(
      "system",
      "os.set_inheritable(c.fileno(), True)\n"
      "rc = os.system('exec cat <&%d >&%d' % (c.fileno(), c.fileno()))\n");
}

TEST(ExecTest, PythonOsPosixSpawnChildServesTheConnection) {
  ExpectSpawnedCatServesTheRest(
      "posix_spawn",
      "pid = os.posix_spawn('/bin/cat', ['cat'], os.environ, file_actions=[\n"
      "    (os.POSIX_SPAWN_DUP2, c.fileno(), 0), (os.POSIX_SPAWN_DUP2, c.fileno(), 1)])\n"
      "rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n");
}

// A vfork child given the connection (subprocess's stdin and stdout, dup2'd to 0 and 1): from the
// child, before its exec, the parent's connection moves to kernel TCP on both ends, and cat serves
// it as it would a kernel connection. Before, cat got a reset socket and our end ECONNRESET.
// Whether kcmp(2) answers here (a container's seccomp profile may refuse it): the vfork child's
// check that it still holds the connection's fds. Without it the child gets a reset socket.
bool KcmpWorks() { return syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, 0, 0) == 0; }

// Python 3.13 starts some children with posix_spawn (compat/interpose_spawn.cc, tested above):
// these tests pin subprocess to vfork.
constexpr char kVforkOnly[] = "subprocess._USE_POSIX_SPAWN = False\n";

TEST(ExecTest, PythonSubprocessChildServesTheConnection) {
  if (!KcmpWorks()) GTEST_SKIP() << "kcmp(2) refused here: " << strerror(errno);
  ExpectSpawnedCatServesTheRest(
      "subprocess", std::string(kVforkOnly) +
                        "rc = subprocess.run(['/bin/cat'], stdin=c, stdout=c).returncode\n");
}

// A vfork child that keeps the connection at its own number (pass_fds) and only exits: the
// connection moved to kernel TCP for it, and the parent carries on over TCP, byte-exact.
TEST(ExecTest, PythonSubprocessKeepingTheConnectionLeavesTheParentOnTcp) {
  if (!KcmpWorks()) GTEST_SKIP() << "kcmp(2) refused here: " << strerror(errno);
  ExpectSpawnedCatServesTheRest(
      "pass_fds", std::string(kVforkOnly) +
                      "subprocess.run(['/bin/true'], pass_fds=(c.fileno(),), check=True)\n"
                      "while d := c.recv(65536): c.sendall(d)\n"
                      "rc = 0\n");
}

// Where the vfork child cannot move the connection (a fork shares it: the child cannot count its
// holders), cat gets a reset socket, never a kernel socket nobody writes to, and the parent's
// connection carries on over shm.
TEST(ExecTest, PythonSubprocessOfAForkSharedConnectionGetsAResetSocket) {
  if (!Installed("python3")) GTEST_SKIP() << "python3 not installed";
  Listener listener;
  const std::string script =
      std::string(kVforkOnly) +
      "r, w = os.pipe()\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    os.close(w); os.read(r, 1); os._exit(0)\n"
      "os.close(r)\n"
      "p = subprocess.run(['/bin/cat'], stdin=c, stdout=subprocess.DEVNULL,\n"
      "                   stderr=subprocess.DEVNULL, timeout=20)\n"
      "os.close(w); os.waitpid(pid, 0)\n"
      "if p.returncode == 0: sys.exit(3)\n"
      "while d := c.recv(65536): c.sendall(d)\n"
      "c.close()\n";
  Spawned client(PythonConnected(listener.port(), "c", script), {}, TempPath("vforkshared.log"));
  const int fd = listener.Accept();
  ASSERT_GE(fd, 0) << client.Output();
  ASSERT_EQ(ModeOf(fd), SAN_MODE_SHM);
  ExpectEcho(fd, Pattern(1u << 18, 3));
  EXPECT_EQ(ModeOf(fd), SAN_MODE_SHM);
  ExpectEofThenExit(fd, client);
}

// The same in an asyncio program (both ends of the connection in it, its event loop on epoll): the
// vfork child's closes reached the loop's epoll set and both sockets, and the program hung.
TEST(ExecTest, PythonAsyncioSubprocessKeepsTheLoopAndItsConnection) {
  if (!Installed("python3")) GTEST_SKIP() << "python3 not installed";
  const std::string report = TempPath("asyncio.report");
  unlink(report.c_str());
  const std::string script =
      "import asyncio, subprocess\n"
      "async def echo(r, w):\n"
      "    while d := await r.read(65536):\n"
      "        w.write(d)\n"
      "        await w.drain()\n"
      "    w.close()\n"
      "async def main():\n"
      "    srv = await asyncio.start_server(echo, '127.0.0.1', 0)\n"
      "    r, w = await asyncio.open_connection(*srv.sockets[0].getsockname())\n"
      "    for i in range(200):\n"
      "        w.write(bytes([i]) * 1000)\n"
      "        await w.drain()\n"
      "        assert await r.readexactly(1000) == bytes([i]) * 1000\n"
      "        if i == 100: subprocess.run(['/bin/true'], check=True)\n"
      "    w.close()\n"
      "    srv.close()\n"
      "asyncio.run(main())\n";
  Spawned program({SAN_SANRUN, "--set", "SAN_SETUP=eager", "--", "python3", "-c", script},
                  {"SAN_REPORT=" + report}, TempPath("asyncio.log"));
  EXPECT_EQ(program.Wait(kWaitMs), 0) << program.Output();
  const Usage python = UsageOf(report, "python3");
  EXPECT_EQ(python.shm_connections, 2u) << program.Output();
  EXPECT_EQ(python.shm_bytes_sent, 2u * 200 * 1000);
  unlink(report.c_str());
}

// SAN_INHERIT is input to every preloaded program: a value that is not what an exec of ours
// left is reported and ignored, and the fd it names is not touched.
TEST(ExecTest, BadInheritVariableIsIgnored) {
  for (const std::string value : {"abc", "-1", "99999", "0"}) {
    SCOPED_TRACE(value);
    Spawned prog({SAN_SANRUN, "--", "bash", "-c", "cat < /etc/hostname"}, {"SAN_INHERIT=" + value},
                 TempPath("badinherit.log"));
    EXPECT_EQ(prog.Wait(kWaitMs), 0) << prog.Output();
    const std::string log = prog.Output();
    EXPECT_NE(log.find("SAN_INHERIT"), std::string::npos) << "not reported: " << log;
    std::ifstream host("/etc/hostname");
    std::string first;
    std::getline(host, first);
    EXPECT_NE(log.find(first), std::string::npos) << "the program's own input was lost: " << log;
  }
}

// Counts this process's open fds.
int OpenFds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) >= 0;
  return n;
}

// A SAN pair inside this process, both ends inherited by an exec (not close-on-exec).
void MakeInheritablePair(int* client, int* server) {
  Listener listener;
  *client = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(listener.port());
  ASSERT_EQ(connect(*client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  *server = listener.Accept();
  ASSERT_GE(*server, 0);
  ASSERT_EQ(ModeOf(*client), SAN_MODE_SHM);
}

void ExpectPairWorks(int client, int server) {
  const std::vector<char> there = Pattern(200000, 1), back = Pattern(150000, 2);
  std::thread t([&] {
    size_t done = 0;
    while (done < there.size()) {
      const ssize_t n = write(client, there.data() + done, there.size() - done);
      ASSERT_GT(n, 0) << strerror(errno);
      done += static_cast<size_t>(n);
    }
  });
  int err = 0;
  EXPECT_TRUE(ReadUpTo(server, there.size(), &err) == there) << strerror(err);
  t.join();
  ASSERT_EQ(write(server, back.data(), back.size()), static_cast<ssize_t>(back.size()));
  EXPECT_TRUE(ReadUpTo(client, back.size(), &err) == back) << strerror(err);
  EXPECT_EQ(ModeOf(client), SAN_MODE_SHM);
  EXPECT_EQ(ModeOf(server), SAN_MODE_SHM);
}

// exec fails (no such file): both ends, which it had packed to move (the environment names the
// preload library) or swapped for reset sockets (it does not), work on as before, on shm, with
// the same fds and flags; nothing is left open.
TEST(ExecTest, FailedExecLeavesSocketsWorking) {
  int client = -1, server = -1;
  MakeInheritablePair(&client, &server);
  ASSERT_EQ(dup2(client, 0), 0) << "stdin as a dup: the exec waits for other holders there";
  const int fds_before = OpenFds();
  std::string preload = "LD_PRELOAD=/nonexistent/libsan_preload.so";
  for (bool with_layer : {true, false}) {
    SCOPED_TRACE(with_layer ? "new image would load the layer" : "new image without the layer");
    char* argv[] = {const_cast<char*>("prog"), nullptr};
    char* env_with[] = {preload.data(), nullptr};
    char* env_without[] = {nullptr};
    errno = 0;
    EXPECT_EQ(execve("/nonexistent/prog", argv, with_layer ? env_with : env_without), -1);
    EXPECT_EQ(errno, ENOENT);
    EXPECT_EQ(OpenFds(), fds_before);
    EXPECT_EQ(fcntl(client, F_GETFD), 0);
    ExpectPairWorks(client, server);
    ExpectPairWorks(0, server);
  }
  // Also through execvp's PATH search and execl's argument list.
  EXPECT_EQ(execlp("no-such-program-here", "x", static_cast<char*>(nullptr)), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(OpenFds(), fds_before);
  ExpectPairWorks(client, server);
  // The fork hold came back: closing every number still ends the connection with EOF.
  ASSERT_EQ(dup2(server, 0), 0);  // replaces the client's dup: closes that number
  close(client);
  int err = 0;
  EXPECT_TRUE(ReadUpTo(server, 1, &err).empty());
  EXPECT_EQ(err, 0) << strerror(err);
  close(server);
  int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, 0);
  close(devnull);
}

}  // namespace
}  // namespace san::testing_support
