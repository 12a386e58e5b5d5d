// conn-bench churn: connect + 1-byte echo + close, per second (churn.h).
#include "churn.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "child.h"
#include "proc_stats.h"

namespace san::connbench {
namespace {

constexpr char kQuit = 'Q';       // a connection carrying this byte stops the server
constexpr char kGo = 'g';         // coordinator -> client: start the loop
constexpr long kMaxErrors = 200;  // a client stops after this many failures (a broken transport)

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

std::string Failure(const char* call, int err) { return std::string(call) + ": " + strerror(err); }

struct ServerReport {
  long accepted = 0;
  long errors = 0;
  char first_error[128] = {};
};

struct ClientReport {
  long connections = 0;
  long errors = 0;
  long shm = 0;
  double elapsed = 0;
  char first_error[128] = {};
};

// Echoes a connection's one byte: "" if it did, else what failed. `*quit`: the byte was kQuit.
std::string EchoOne(const Calls& calls, int fd, bool* quit) {
  char byte = 0;
  const ssize_t got = calls.recv(fd, &byte, 1, 0);
  if (got == 1 && byte == kQuit) {
    *quit = true;
    return "";
  }
  if (got != 1) {
    return got == 0 ? std::string("server recv: EOF before the byte")
                    : Failure("server recv", errno);
  }
  if (calls.send(fd, &byte, 1, MSG_NOSIGNAL) != 1) return Failure("server send", errno);
  return "";
}

// The accept-then-fork server's handler: echoes, closes, exits (status 0 if the echo went).
[[noreturn]] void EchoInChild(const Calls& calls, int listener, int fd) {
  calls.close(listener);
  bool quit = false;
  const bool ok = EchoOne(calls, fd, &quit).empty() && !quit;
  calls.close(fd);
  exit(ok ? 0 : 1);  // exit, not _exit: sanlib's exit handler posts a SAN channel's FIN
}

// The server: accept, echo one byte, close; until a connection brings kQuit. Without the echo:
// accept, close; until a connection comes after `*stop` was set. `fork_server`: each connection's
// echo is a child's (EchoInChild), reaped as they end; the connection that stops the server
// (after `*stop` was set) is served in the server itself.
int ServeEcho(const Calls& calls, const ChurnParams& params, const std::atomic<int>* stop,
              int to_parent) {
  uint16_t port = 0;
  const int listener = OpenListener(calls, 1024, &port);
  if (listener < 0 || !WriteAll(to_parent, &port, sizeof port)) return 2;
  ServerReport report;
  std::string first;
  auto fail = [&](const std::string& what) {
    ++report.errors;
    if (first.empty()) first = what;
  };
  // Waited for, not ignored: their CPU then counts in the server's (wait4 in the coordinator).
  auto reap_handlers = [&](int options) {
    int status = 0;
    while (waitpid(-1, &status, options) > 0) {
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("an echo child failed");
    }
  };
  for (;;) {
    const int fd = calls.accept(listener, nullptr, nullptr);
    if (fd < 0) {
      fail(Failure("accept", errno));
      if (report.errors > 100 * kMaxErrors) break;
      continue;
    }
    ++report.accepted;
    if (!params.echo) {
      calls.close(fd);
      if (stop->load()) break;
      continue;
    }
    if (params.fork_server && !stop->load()) {
      const pid_t child = fork();
      if (child == 0) EchoInChild(calls, listener, fd);
      if (child < 0) fail(Failure("fork", errno));
      calls.close(fd);
      reap_handlers(WNOHANG);
      continue;
    }
    bool quit = false;
    if (std::string why = EchoOne(calls, fd, &quit); !why.empty()) fail(why);
    calls.close(fd);
    if (quit) break;
  }
  reap_handlers(0);
  --report.accepted;  // the quit connection
  SetText(report.first_error, sizeof report.first_error, first);
  calls.close(listener);
  return WriteAll(to_parent, &report, sizeof report) ? 0 : 3;
}

// A connection that worked: counted, with its mode (the first fallback reason kept).
void CountMode(const Calls& calls, int fd, ClientReport* report, std::string* first) {
  ++report->connections;
  std::string why;
  const std::string mode = ConnectionMode(calls, fd, &why);
  if (mode == "shm") {
    ++report->shm;
  } else if (&calls != FindCalls("tcp") && first->empty()) {
    *first = "connection on " + mode + (why.empty() ? "" : ": " + why);
  }
}

// One client: the timed loop.
int ConnectLoop(const Calls& calls, uint16_t port, const ChurnParams& params, int to_parent,
                int from_parent) {
  char go = 0;
  if (!ReadWithin(from_parent, &go, 1, 10000) || go != kGo) return 2;
  ClientReport report;
  std::string first;
  auto fail = [&](const std::string& what) {
    ++report.errors;
    if (first.empty()) first = what;
  };
  const sockaddr_in server = Loopback(port);
  const double start = Now();
  const double end = start + params.seconds;
  unsigned char next = 0;
  while (Now() < end && report.errors < kMaxErrors) {
    const int fd = calls.socket(AF_INET, calls.socket_type | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      fail(Failure("socket", errno));
      continue;
    }
    next = static_cast<unsigned char>(next == 255 ? 1 : next + 1);  // never kQuit's neighbour 0
    if (next == static_cast<unsigned char>(kQuit)) ++next;
    unsigned char echo = 0;
    if (calls.connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
      fail(Failure("connect", errno));
    } else if (!params.echo) {
      // The server's close: EOF.
      if (const ssize_t got = calls.recv(fd, &echo, 1, 0); got != 0) {
        fail(got > 0 ? std::string("recv: a byte instead of EOF") : Failure("recv", errno));
      } else {
        CountMode(calls, fd, &report, &first);
      }
    } else if (calls.send(fd, &next, 1, MSG_NOSIGNAL) != 1) {
      fail(Failure("send", errno));
    } else if (const ssize_t got = calls.recv(fd, &echo, 1, 0); got != 1) {
      fail(got == 0 ? std::string("recv: EOF instead of the echo") : Failure("recv", errno));
    } else if (echo != next) {
      fail("echo mismatch: sent " + std::to_string(next) + ", got " + std::to_string(echo));
    } else {
      CountMode(calls, fd, &report, &first);
    }
    calls.close(fd);
  }
  report.elapsed = Now() - start;
  SetText(report.first_error, sizeof report.first_error, first);
  return WriteAll(to_parent, &report, sizeof report) ? 0 : 3;
}

// Stops the server: a plain kernel TCP connection carrying kQuit (a SAN listener takes plain
// clients too), or, without the echo, any connection (`quit` false: the server closes it at once,
// and the byte could meet its reset). False if it could not be delivered.
bool StopServer(uint16_t port, bool quit) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const sockaddr_in server = Loopback(port);
  timeval limit = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) == 0 &&
                  (!quit || send(fd, &kQuit, 1, MSG_NOSIGNAL) == 1);
  close(fd);
  return ok;
}

}  // namespace

ChurnResult RunChurn(const Calls& calls, const ChurnParams& params) {
  ChurnResult result;
  const int timeout_ms = static_cast<int>((params.seconds + params.timeout_s) * 1000);
  // Shared with the server (a fork child): set before the connection that stops a server
  // without the echo.
  void* page = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    result.failed = true;
    result.failure = Failure("mmap", errno);
    return result;
  }
  auto* stop = new (page) std::atomic<int>(0);
  struct Unmap {
    void* page;
    ~Unmap() { munmap(page, sizeof(std::atomic<int>)); }
  } unmap{page};
  Child server = Spawn([&](int up, int) { return ServeEcho(calls, params, stop, up); });
  uint16_t port = 0;
  if (!ReadWithin(server.from_child, &port, sizeof port, 10000)) {
    result.failed = true;
    result.failure = "server did not start (" + Reap(&server, 1000).how + ")";
    return result;
  }
  std::vector<Child> clients;
  for (int i = 0; i < params.clients; ++i) {
    clients.push_back(
        Spawn([&](int up, int down) { return ConnectLoop(calls, port, params, up, down); }));
  }
  for (Child& c : clients) WriteAll(c.to_child, &kGo, 1);

  double cpu_us = 0;
  double wall = 0;
  for (Child& c : clients) {
    ClientReport report;
    const bool got = ReadWithin(c.from_child, &report, sizeof report, timeout_ms);
    const Ending ending = Reap(&c, got ? 5000 : 1);
    cpu_us += ending.cpu_us;
    if (!got) {
      result.failed = true;
      if (result.failure.empty()) result.failure = "client " + ending.how;
      continue;
    }
    result.connections += report.connections;
    result.errors += report.errors;
    result.shm += report.shm;
    if (report.elapsed > 0) result.per_second += report.connections / report.elapsed;
    if (report.elapsed > wall) wall = report.elapsed;
    if (result.first_error.empty()) result.first_error = report.first_error;
  }

  ServerReport report;
  stop->store(1);
  const bool stopped = StopServer(port, params.echo);
  const bool got = stopped && ReadWithin(server.from_child, &report, sizeof report, 5000);
  const Ending ending = Reap(&server, got ? 5000 : 1);
  cpu_us += ending.cpu_us;
  if (!got) {
    result.failed = true;
    if (result.failure.empty()) result.failure = "server " + ending.how;
  } else {
    result.errors += report.errors;
    if (result.first_error.empty()) result.first_error = report.first_error;
  }
  if (result.connections == 0 && !result.failed) {
    result.failed = true;
    result.failure = "no connection worked";
  }
  if (result.connections > 0) result.cpu_us_per_conn = cpu_us / result.connections;
  return result;
}

}  // namespace san::connbench
