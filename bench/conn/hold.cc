// conn-bench hold: N concurrent connections, what each costs (hold.h).
#include "hold.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "child.h"
#include "proc_stats.h"

namespace san::connbench {
namespace {

constexpr char kClose = 'c';

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

std::string Failure(const char* call, int err) { return std::string(call) + ": " + strerror(err); }

// Measuring opens files (/proc/self/fd, smaps_rollup): at the fd limit it would fail, so each side
// keeps two fds in reserve and gives them back just before it measures.
class SpareFds {
 public:
  SpareFds() {
    for (int& fd : fds_) fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  ~SpareFds() { Release(); }
  void Release() {
    for (int& fd : fds_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }

 private:
  int fds_[2];
};

// What each side says about itself once every connection has carried its byte.
struct SideReport {
  long established = 0;
  long shm = 0;
  long errors = 0;
  long fds_before = 0, fds_after = 0;
  MemoryUse mem_before, mem_after;
  double establish_s = 0, echo_s = 0;
  double idle_wait_us = 0;  // server: one epoll_wait(0) over all its connections, none ready
  char first_error[128] = {};
};

// Waits for the coordinator's word, then closes every connection and reports the time it took.
int CloseAll(const Calls& calls, std::vector<int>* fds, int to_parent, int from_parent) {
  char word = 0;
  ReadWithin(from_parent, &word, 1, 600000);
  const double start = Now();
  for (int fd : *fds) calls.close(fd);
  const double took = Now() - start;
  return WriteAll(to_parent, &took, sizeof took) ? 0 : 3;
}

// Either side's end: measures itself (the spare fds given back first; they were counted in
// fds_before), reports, then closes every connection at the coordinator's word.
int ReportThenCloseAll(const Calls& calls, SpareFds* spare, SideReport* report,
                       const std::string& first, std::vector<int>* fds, int to_parent,
                       int from_parent) {
  spare->Release();
  report->fds_before -= 2;
  report->fds_after = CountOpenFds();
  report->mem_after = ReadMemoryUse(0);
  SetText(report->first_error, sizeof report->first_error, first);
  if (!WriteAll(to_parent, report, sizeof *report)) return 3;
  return CloseAll(calls, fds, to_parent, from_parent);
}

// One epoll_wait(0) over every connection in `fds`, all idle (each carried its byte, read): the
// cost of a set's members that have nothing to say (an event loop pays it at every call). The
// median of 5 batches of calls, each batch about 50 ms; -1 if the set could not be made or a
// call did not return 0 (a connection ready, or an error: the figure would not be the idle one).
// The epoll fd is closed before the caller counts its fds.
double IdleWaitUs(const Calls& calls, const std::vector<int>& fds) {
  const int ep = calls.epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return -1;
  for (size_t i = 0; i < fds.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (calls.epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
      calls.close(ep);
      return -1;
    }
  }
  epoll_event events[64];
  std::vector<double> batches;
  long calls_per_batch = 1;
  for (int b = 0; b < 6; ++b) {
    const double start = Now();
    long made = 0;
    while (made < calls_per_batch || Now() - start < 0.05) {
      if (calls.epoll_wait(ep, events, 64, 0) != 0) {
        calls.close(ep);
        return -1;
      }
      ++made;
    }
    const double took = Now() - start;
    calls_per_batch = made;
    if (b > 0) batches.push_back(1e6 * took / static_cast<double>(made));  // the first warms up
  }
  calls.close(ep);
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

int Serve(const Calls& calls, long wanted, int to_parent, int from_parent) {
  uint16_t port = 0;
  const int listener = OpenListener(calls, 4096, &port);
  if (listener < 0) return 2;
  std::vector<int> fds;
  fds.reserve(static_cast<size_t>(wanted));
  SpareFds spare;
  SideReport report;
  report.fds_before = CountOpenFds();
  report.mem_before = ReadMemoryUse(0);
  if (!WriteAll(to_parent, &port, sizeof port)) return 2;
  std::string first;
  // Accept until the coordinator says how many the client managed (it may stop short).
  long target = -1;
  while (target < 0 || static_cast<long>(fds.size()) < target) {
    pollfd pfds[2] = {{listener, POLLIN, 0}, {from_parent, POLLIN, 0}};
    if (calls.poll(pfds, target < 0 ? 2 : 1, 1000) <= 0) continue;
    if (target < 0 && (pfds[1].revents & (POLLIN | POLLHUP))) {
      if (!ReadWithin(from_parent, &target, sizeof target, 1000)) return 4;
      continue;
    }
    if (!(pfds[0].revents & POLLIN)) continue;
    const int fd = calls.accept(listener, nullptr, nullptr);
    if (fd < 0) {
      ++report.errors;
      if (first.empty()) first = Failure("accept", errno);
      if (errno == EMFILE || errno == ENFILE) usleep(1000);
      continue;
    }
    fds.push_back(fd);
  }
  // Echo one byte on each, in order (the client sends them all before reading).
  for (int fd : fds) {
    char byte = 0;
    if (calls.recv(fd, &byte, 1, 0) != 1 || calls.send(fd, &byte, 1, MSG_NOSIGNAL) != 1) {
      ++report.errors;
      if (first.empty()) first = Failure("server echo", errno);
    } else {
      ++report.established;
    }
  }
  spare.Release();  // the epoll fd's (at the fd limit)
  report.idle_wait_us = IdleWaitUs(calls, fds);
  return ReportThenCloseAll(calls, &spare, &report, first, &fds, to_parent, from_parent);
}

int Connect(const Calls& calls, long wanted, uint16_t port, int to_parent, int from_parent) {
  SideReport report;
  std::string first;
  std::vector<int> fds;
  fds.reserve(static_cast<size_t>(wanted));
  SpareFds spare;
  // sanlib's per-process set-up belongs to the baseline, not to the connections.
  if (int probe = calls.socket(AF_INET, calls.socket_type | SOCK_CLOEXEC, 0); probe >= 0) {
    calls.close(probe);
  }
  report.fds_before = CountOpenFds();
  report.mem_before = ReadMemoryUse(0);
  char go = 0;
  if (!WriteAll(to_parent, &go, 1) || !ReadWithin(from_parent, &go, 1, 30000)) return 2;
  const sockaddr_in server = Loopback(port);
  double start = Now();
  while (static_cast<long>(fds.size()) < wanted) {
    const int fd = calls.socket(AF_INET, calls.socket_type | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      first = Failure("socket", errno) + " after " + std::to_string(fds.size());
      break;
    }
    if (calls.connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
      first = Failure("connect", errno) + " after " + std::to_string(fds.size());
      calls.close(fd);
      break;
    }
    fds.push_back(fd);
  }
  report.establish_s = Now() - start;
  const long count = static_cast<long>(fds.size());
  if (!WriteAll(to_parent, &count, sizeof count)) return 3;  // relayed to the server

  start = Now();
  for (size_t i = 0; i < fds.size(); ++i) {
    const unsigned char byte = static_cast<unsigned char>(i * 7 + 1);
    if (calls.send(fds[i], &byte, 1, MSG_NOSIGNAL) != 1) {
      ++report.errors;
      if (first.empty()) first = Failure("send", errno);
    }
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    unsigned char echo = 0;
    const unsigned char byte = static_cast<unsigned char>(i * 7 + 1);
    if (calls.recv(fds[i], &echo, 1, 0) != 1 || echo != byte) {
      ++report.errors;
      if (first.empty()) first = "echo " + std::to_string(i) + " missing or wrong";
      continue;
    }
    ++report.established;
    std::string why;
    if (ConnectionMode(calls, fds[i], &why) == "shm") {
      ++report.shm;
    } else if (&calls != FindCalls("tcp") && first.empty()) {
      first = "connection " + std::to_string(i) + " on tcp: " + why;
    }
  }
  report.echo_s = Now() - start;
  return ReportThenCloseAll(calls, &spare, &report, first, &fds, to_parent, from_parent);
}

double PerConn(double before, double after, long count) { return (after - before) / count; }

}  // namespace

HoldResult RunHold(const Calls& calls, const HoldParams& params) {
  HoldResult result;
  result.wanted = params.connections;
  const int timeout_ms = params.timeout_s * 1000;
  // Each connection may take several fds per side (sanlib today: 8, the socket and its channel's).
  RaiseFdLimit(params.connections * 12 + 1024, &result.note);

  Child server =
      Spawn([&](int up, int down) { return Serve(calls, params.connections, up, down); });
  uint16_t port = 0;
  if (!ReadWithin(server.from_child, &port, sizeof port, 10000)) {
    result.failed = true;
    result.failure = "server did not start (" + Reap(&server, 1000).how + ")";
    return result;
  }
  Child client =
      Spawn([&](int up, int down) { return Connect(calls, params.connections, port, up, down); });
  char ready = 0;
  long count = -1;
  SideReport c, s;
  long slab_before = -1, slab_after = -1;
  // The step that did not complete, for the failure (a child that hangs is killed afterwards).
  const char* step = "";
  int step_s = 0;
  auto read_step = [&](const char* what, int fd, void* buf, size_t len, int within_s) {
    step = what;
    step_s = within_s;
    return ReadWithin(fd, buf, len, within_s * 1000);
  };
  bool ok = read_step("client start", client.from_child, &ready, 1, 10);
  if (ok) {
    slab_before = ReadSlabKib();
    ok = WriteAll(client.to_child, &ready, 1) &&
         read_step("client's connections (count)", client.from_child, &count, sizeof count,
                   params.timeout_s) &&
         WriteAll(server.to_child, &count, sizeof count) &&
         read_step("client's report", client.from_child, &c, sizeof c, params.timeout_s) &&
         read_step("server's report", server.from_child, &s, sizeof s, params.timeout_s);
    slab_after = ReadSlabKib();
  }
  double client_close = 0, server_close = 0;
  if (ok) {
    WriteAll(client.to_child, &kClose, 1);
    WriteAll(server.to_child, &kClose, 1);
    ReadWithin(client.from_child, &client_close, sizeof client_close, timeout_ms);
    ReadWithin(server.from_child, &server_close, sizeof server_close, timeout_ms);
  }
  const Ending client_end = Reap(&client, ok ? 10000 : 1);
  const Ending server_end = Reap(&server, ok ? 10000 : 1);
  if (!ok) {
    result.failed = true;
    result.failure = std::string("no ") + step + " within " + std::to_string(step_s) +
                     " s: client " + client_end.how + ", server " + server_end.how;
    return result;
  }
  result.established = c.established < s.established ? c.established : s.established;
  result.shm = c.shm;
  result.errors = c.errors + s.errors;
  result.establish_s = c.establish_s;
  result.echo_s = c.echo_s;
  result.close_s = client_close;
  result.idle_wait_us = s.idle_wait_us;
  std::string first = c.first_error[0] ? c.first_error : s.first_error;
  if (!first.empty()) result.note += (result.note.empty() ? "" : "; ") + first;
  if (count <= 0 || result.established == 0) {
    result.failed = true;
    result.failure = "no connection carried its byte";
    return result;
  }
  const long n = count;
  result.fds_per_conn = PerConn(c.fds_before + s.fds_before, c.fds_after + s.fds_after, n);
  result.rss_kib_per_conn = PerConn(c.mem_before.rss_kib + s.mem_before.rss_kib,
                                    c.mem_after.rss_kib + s.mem_after.rss_kib, n);
  result.pss_kib_per_conn = PerConn(c.mem_before.pss_kib + s.mem_before.pss_kib,
                                    c.mem_after.pss_kib + s.mem_after.pss_kib, n);
  result.shmem_kib_per_conn = PerConn(c.mem_before.pss_shmem_kib + s.mem_before.pss_shmem_kib,
                                      c.mem_after.pss_shmem_kib + s.mem_after.pss_shmem_kib, n);
  result.slab_kib_per_conn = PerConn(slab_before, slab_after, n);
  const double kib =
      result.pss_kib_per_conn + (result.slab_kib_per_conn > 0 ? result.slab_kib_per_conn : 0);
  if (kib > 0) result.conns_per_gib = 1024.0 * 1024.0 / kib;
  result.cpu_us_per_conn = (client_end.cpu_us + server_end.cpu_us) / n;
  return result;
}

}  // namespace san::connbench
