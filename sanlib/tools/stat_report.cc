#include "sanlib/tools/stat_report.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "sanlib/common/clock.h"
#include "sanlib/common/control_name.h"
#include "sanlib/common/unique_fd.h"

namespace san::tools {
namespace {

// How the control sockets are listed in /proc/net/unix: '@' stands for the abstract name's NUL.
const std::string kListedPrefix = std::string("@") + kControlPrefix;

bool ParseUnsigned(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
    if (next < v) return false;
    v = next;
  }
  *out = v;
  return true;
}

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : line) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

}  // namespace

std::vector<int> StatPids(const std::string& proc_net_unix) {
  std::vector<int> pids;
  std::istringstream in(proc_net_unix);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.rfind(kListedPrefix);
    if (at == std::string::npos) continue;
    uint64_t pid = 0;
    if (!ParseUnsigned(line.substr(at + kListedPrefix.size()), &pid) || pid == 0 ||
        pid > 1u << 22) {
      continue;
    }
    // A listening socket and its accepted connections share the name: list each pid once.
    bool seen = false;
    for (int p : pids) seen = seen || p == static_cast<int>(pid);
    if (!seen) pids.push_back(static_cast<int>(pid));
  }
  return pids;
}

std::string FetchReport(int pid, int timeout_ms) {
  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid()) return "";
  sockaddr_un sun;
  const socklen_t len = ControlSocketName(pid, &sun);
  if (connect(sock.get(), reinterpret_cast<sockaddr*>(&sun), len) != 0 && errno != EINPROGRESS &&
      errno != EAGAIN) {
    return "";
  }
  // The request: a report (control_service.h). The socket buffer takes one byte at once.
  const char request = 'R';
  pollfd w{sock.get(), POLLOUT, 0};
  if (poll(&w, 1, timeout_ms) != 1 || send(sock.get(), &request, 1, MSG_NOSIGNAL) != 1) return "";
  std::string out;
  const uint64_t deadline = NowNs() + uint64_t(timeout_ms) * 1000000;
  char buf[4096];
  while (out.size() < (16u << 20)) {
    const uint64_t now = NowNs();
    if (now >= deadline) return "";
    pollfd p{sock.get(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>((deadline - now) / 1000000) + 1) <= 0) continue;
    const ssize_t r = read(sock.get(), buf, sizeof buf);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return "";
    }
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

int ParseReport(const std::string& report, std::vector<StatRow>* rows) {
  std::istringstream in(report);
  std::string line;
  if (!std::getline(in, line)) return 1;
  const std::vector<std::string> head = Split(line, ' ');
  uint64_t pid = 0;
  if (head.size() != 4 || head[0] != "#sanlib-stat" || head[1] != "1" ||
      !ParseUnsigned(head[2], &pid)) {
    return 1;
  }
  int bad = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = Split(line, '\t');
    StatRow r;
    uint64_t fd, sent, received, credits, mtu;
    if (f.size() != 11 || !ParseUnsigned(f[0], &fd) || !ParseUnsigned(f[5], &sent) ||
        !ParseUnsigned(f[6], &received) || !ParseUnsigned(f[7], &credits) ||
        !ParseUnsigned(f[8], &mtu) || fd > 1u << 30 || credits > UINT32_MAX || mtu > UINT32_MAX) {
      ++bad;
      continue;
    }
    r.pid = static_cast<int>(pid);
    r.comm = head[3];
    r.fd = static_cast<int>(fd);
    r.role = f[1];
    r.mode = f[2];
    r.local = f[3];
    r.peer = f[4];
    r.bytes_sent = sent;
    r.bytes_received = received;
    r.credits = static_cast<uint32_t>(credits);
    r.mtu = static_cast<uint32_t>(mtu);
    r.phase = f[9];
    r.reason = f[10] == "-" ? "" : f[10];
    rows->push_back(r);
  }
  return bad;
}

}  // namespace san::tools
