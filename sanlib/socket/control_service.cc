#include "sanlib/socket/control_service.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "sanlib/common/clock.h"
#include "sanlib/common/control_name.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/scm_rights.h"
#include "sanlib/common/small_file.h"
#include "sanlib/proto/close_state.h"
#include "sanlib/socket/handover.h"
#include "sanlib/socket/late_upgrade.h"

namespace san {
namespace {

std::string AddressText(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  char text[INET6_ADDRSTRLEN + 16];
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    snprintf(text, sizeof text, "%s:%u", host, ntohs(in.sin_port));
    return text;
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    snprintf(text, sizeof text, "[%s]:%u", host, ntohs(in6.sin6_port));
    return text;
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
  std::string line = std::to_string(s.fd.load()) + "\t" + (listening ? "listen" : "conn") + "\t" +
                     (mode == SocketMode::kShm   ? s.stream->endpoint().provider_name()
                      : mode == SocketMode::kTcp ? "tcp"
                                                 : "none") +
                     "\t" + SocketAddress(s.fd.load(), false) + "\t" +
                     (listening ? "*" : SocketAddress(s.fd.load(), true)) + "\t";
  if (mode == SocketMode::kShm) {
    const proto::StreamStats st = s.stream->Stats();
    line += std::to_string(st.bytes_sent) + "\t" + std::to_string(st.bytes_received) + "\t" +
            std::to_string(st.credits) + "\t" + std::to_string(st.mtu) + "\t" +
            proto::ClosePhaseName(st.phase);
  } else {
    line += "0\t0\t0\t0\t-";
  }
  const std::string reason = mode == SocketMode::kTcp ? FallbackReason(s) : "";
  return line + "\t" + Field(reason) + "\n";
}

}  // namespace

std::string ControlService::Report(SocketTable& table) {
  std::string comm = FirstLineOf("/proc/self/comm");
  comm.resize(std::min(comm.size(), comm.find_first_of(" \t")));  // the header's 4th word
  std::string out = "#sanlib-stat 1 " + std::to_string(getpid()) + " " + Field(comm) + "\n";
  table.ForEach([&](SanSocket* s) { out += Line(*s); });
  return out;
}

Status ControlService::Open() {
  if (listener_.valid() && pid_ == getpid()) return Status::Ok();
  listener_.reset(PlaceLow(kernel::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)));
  if (!listener_.valid()) return Status::FromErrno("socket(AF_UNIX)");
  pid_ = getpid();
  sockaddr_un sun;
  const socklen_t len = ControlSocketName(pid_, &sun);
  if (kernel::bind(listener_.get(), reinterpret_cast<sockaddr*>(&sun), len) != 0 ||
      kernel::listen(listener_.get(), 16) != 0) {
    Status st = Status::FromErrno("bind(control socket)");
    listener_.reset();
    return st;
  }
  return Status::Ok();
}

namespace {

// Reads exactly n bytes of a request, waiting at most ~200 ms in all (the connection thread has
// other work; a client that does not send its request promptly is dropped). Fds that come with
// the bytes are collected in *fds when given, else closed.
bool ReadRequest(int fd, void* out, size_t n, uint64_t deadline_ns,
                 std::vector<UniqueFd>* fds = nullptr) {
  std::vector<UniqueFd> unwanted;
  return ReceiveExactly(fd, out, n, fds ? fds : &unwanted, deadline_ns).ok();
}

void SendReport(int fd, const std::string& report) {
  size_t done = 0;
  while (done < report.size()) {
    iovec iov{const_cast<char*>(report.data()) + done, report.size() - done};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const ssize_t n = kernel::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n <= 0) return;  // the reader went away or stalled past SO_SNDTIMEO: a cut report
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void ControlService::Serve(SocketTable& table, const TakeChannel& take) {
  for (;;) {
    UniqueFd conn(kernel::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) return;
    ucred cred{};
    socklen_t clen = sizeof cred;
    if (kernel::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) continue;
    const bool trusted = cred.uid == geteuid() || cred.uid == 0;
    // A slow reader gets a bounded wait, then a cut answer.
    timeval tv{0, 200000};
    kernel::setsockopt(conn.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const uint64_t deadline = NowNs() + 200000000ull;
    char type = 0;
    std::vector<UniqueFd> proof;
    if (!ReadRequest(conn.get(), &type, 1, deadline, &proof)) continue;
    if (type == kReport && trusted) {
      SendReport(conn.get(), Report(table));
    } else if (type == kClaim) {
      fabric::ConnectData data;
      if (!ReadRequest(conn.get(), &data.length, 1, deadline) || data.length > data.kMax ||
          !ReadRequest(conn.get(), data.bytes, data.length, deadline)) {
        continue;
      }
      Result<proto::FourTuple> tuple = proto::DecodeConnectRequest(data);
      if (!tuple.ok() || proof.size() != 1) {
        SendHandover(conn.get(), nullptr, EINVAL);
        continue;
      }
      // Normally a matter of microseconds (the client names its channel as its connect()
      // returns): asked again for up to 50 us before the claim is kept for later passes, as a
      // Claim in this process waits (and an owner that is exiting answers before it is gone).
      const uint64_t spin_until = NowNs() + kClaimSpinNs;
      bool keep;
      while ((keep = TryClaim(conn.get(), tuple.value(), proof[0].get(), false, take)) &&
             NowNs() < spin_until) {
        sched_yield();
      }
      if (keep) {
        parked_.push_back(
            Parked{std::move(conn), tuple.value(), std::move(proof[0]), NowNs() + kClaimWaitNs});
      }
    }
  }
}

void ControlService::ServeParked(const TakeChannel& take) {
  const uint64_t now = NowNs();
  parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                               [&](Parked& p) {
                                 return !TryClaim(p.conn.get(), p.tuple, p.proof.get(),
                                                  now >= p.until_ns, take);
                               }),
                parked_.end());
}

bool ControlService::TryClaim(int conn, const proto::FourTuple& tuple, int proof_fd, bool last,
                              const TakeChannel& take) {
  Result<std::unique_ptr<proto::Stream>> taken = take(tuple, proof_fd, last);
  if (!taken.ok() && taken.status().code() == EAGAIN && !last) return true;
  std::unique_ptr<proto::Stream> stream = taken.ok() ? std::move(taken).value() : nullptr;
  Status st = SendHandover(conn, stream.get(), taken.ok() ? 0 : taken.status().code());
  // A channel we could not hand over is lost to its accepter: reset it so the client is not
  // left waiting on a channel nobody reads.
  if (stream && !st.ok()) stream->Abort();
  return false;
}

}  // namespace san
