#include "socket/stat_service.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "proto/close_state.h"
#include "socket/kernel.h"

namespace san {
namespace {

std::string AddressText(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  return "*";
}

std::string SocketAddress(int fd, bool peer) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int rc = peer ? kernel::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                      : kernel::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return rc == 0 ? AddressText(a) : "*";
}

// Tabs and newlines would break the line format; a reason is free text.
std::string Field(std::string text) {
  for (char& c : text) {
    if (c == '\t' || c == '\n') c = ' ';
  }
  return text.empty() ? "-" : text;
}

std::string Line(SanSocket& s) {
  const SocketMode mode = s.mode.load(std::memory_order_acquire);
  const bool listening = s.listening.load();
  std::string line = std::to_string(s.fd) + "\t" + (listening ? "listen" : "conn") + "\t" +
                     (mode == SocketMode::kShm ? "shm" : mode == SocketMode::kTcp ? "tcp" : "none") +
                     "\t" + SocketAddress(s.fd, false) + "\t" +
                     (listening ? "*" : SocketAddress(s.fd, true)) + "\t";
  if (mode == SocketMode::kShm) {
    const proto::StreamStats st = s.stream->Stats();
    line += std::to_string(st.bytes_sent) + "\t" + std::to_string(st.bytes_received) + "\t" +
            std::to_string(st.credits) + "\t" + std::to_string(st.mtu) + "\t" +
            proto::ClosePhaseName(st.phase);
  } else {
    line += "0\t0\t0\t0\t-";
  }
  const std::string reason = mode == SocketMode::kTcp ? s.fallback_reason : "";
  return line + "\t" + Field(reason) + "\n";
}

void AbstractName(int pid, sockaddr_un* sun, socklen_t* len) {
  *sun = sockaddr_un{};
  sun->sun_family = AF_UNIX;
  const int n = snprintf(sun->sun_path + 1, sizeof sun->sun_path - 1, "%s%d",
                         StatService::kNamePrefix, pid);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

}  // namespace

std::string StatService::Report(SocketTable& table) {
  std::string comm;
  std::ifstream("/proc/self/comm") >> comm;
  std::string out = "#sanlib-stat 1 " + std::to_string(getpid()) + " " + Field(comm) + "\n";
  table.ForEach([&](SanSocket* s) { out += Line(*s); });
  return out;
}

Status StatService::Open() {
  if (listener_.valid() && pid_ == getpid()) return Status::Ok();
  listener_.reset(kernel::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener_.valid()) return Status::FromErrno("socket(AF_UNIX)");
  pid_ = getpid();
  sockaddr_un sun;
  socklen_t len;
  AbstractName(pid_, &sun, &len);
  if (kernel::bind(listener_.get(), reinterpret_cast<sockaddr*>(&sun), len) != 0 ||
      kernel::listen(listener_.get(), 16) != 0) {
    Status st = Status::FromErrno("bind(stat socket)");
    listener_.reset();
    return st;
  }
  return Status::Ok();
}

void StatService::Serve(SocketTable& table) {
  for (;;) {
    UniqueFd conn(kernel::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) return;
    ucred cred{};
    socklen_t clen = sizeof cred;
    if (kernel::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
        (cred.uid != geteuid() && cred.uid != 0)) {
      continue;  // not ours to see: close without a word
    }
    const std::string report = Report(table);
    // A slow reader gets a bounded wait (the connection thread has other work), then a cut report.
    const int fl = kernel::fcntl(conn.get(), F_GETFL, 0);
    kernel::fcntl(conn.get(), F_SETFL, fl & ~O_NONBLOCK);
    timeval tv{0, 200000};
    kernel::setsockopt(conn.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t done = 0;
    while (done < report.size()) {
      iovec iov{const_cast<char*>(report.data()) + done, report.size() - done};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      const ssize_t n = kernel::sendmsg(conn.get(), &msg, MSG_NOSIGNAL);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
}

}  // namespace san
