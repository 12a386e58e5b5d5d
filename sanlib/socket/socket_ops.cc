// Connection life cycle: socket, listen, accept, connect, shutdown, close, exit and fork hooks.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "san/san.h"
#include "sanlib/common/clock.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/fork_path.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/fd_budget.h"
#include "sanlib/socket/late_phase.h"
#include "sanlib/socket/rendezvous_owner.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"
#include "sanlib/socket/tcp_move.h"

namespace san {
namespace {

bool IsInet(int family) { return family == AF_INET || family == AF_INET6; }

// The source address the kernel would pick to reach `peer` (a UDP connect sends nothing).
Result<sockaddr_storage> RouteSource(const sockaddr* peer, socklen_t len) {
  UniqueFd udp(kernel::socket(peer->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!udp.valid()) return Status::FromErrno("socket(route lookup)");
  if (kernel::connect(udp.get(), peer, len) != 0) return Status::FromErrno("connect(route lookup)");
  sockaddr_storage src{};
  socklen_t slen = sizeof src;
  if (kernel::getsockname(udp.get(), reinterpret_cast<sockaddr*>(&src), &slen) != 0) {
    return Status::FromErrno("getsockname(route lookup)");
  }
  proto::PortField(src) = 0;
  return src;
}

// INADDR_ANY or in6addr_any.
bool IsWildcard(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr == htonl(INADDR_ANY);
  }
  return a.ss_family == AF_INET6 &&
         IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
}

}  // namespace

Result<sockaddr_storage> LocalAddress(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (kernel::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return Status::FromErrno("getsockname");
  }
  return proto::CanonicalAddress(reinterpret_cast<sockaddr*>(&a), len);
}

bool AddressLess(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return a.ss_family < b.ss_family;
  const size_t off =
      a.ss_family == AF_INET ? offsetof(sockaddr_in, sin_addr) : offsetof(sockaddr_in6, sin6_addr);
  const size_t n = a.ss_family == AF_INET ? 4 : 16;
  const int c =
      memcmp(reinterpret_cast<const char*>(&a) + off, reinterpret_cast<const char*>(&b) + off, n);
  if (c != 0) return c < 0;
  return ntohs(proto::PortOf(a)) < ntohs(proto::PortOf(b));
}

Result<sockaddr_storage> PeerAddress(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (kernel::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return Status::FromErrno("getpeername");
  }
  return proto::CanonicalAddress(reinterpret_cast<sockaddr*>(&a), len);
}

namespace {

// The client half of a SAN channel to `peer`, announced to its listener under the 4-tuple the
// connection will have. A socket with no port yet (the usual client) is not bound to learn one:
// bind() cannot take a port that a TIME_WAIT connection holds, where connect() can (to another
// peer, or reusing it on loopback), so a host whose short connections had used up the ports
// refused every SAN client (EADDRINUSE) while TCP connected. Instead the request goes with client
// port 0 and `*named_later` is set: the caller's connect() picks the port and the client's
// WAKEUP names it (Stream::StartNamed); the listener's accept() waits for the name
// (ConnectionThread::Claim).
Result<std::unique_ptr<proto::Stream>> SetUpChannel(SanSocket& s, fabric::Provider& provider,
                                                    const sockaddr* peer, socklen_t len,
                                                    bool* named_later) {
  Result<sockaddr_storage> local = LocalAddress(s.fd);
  if (!local.ok()) return local.status();
  const in_port_t port = proto::PortOf(local.value());
  if (IsWildcard(local.value())) {
    // Unbound, or bound to a port on every address before connect() (bindresvport, as
    // libtirpc's clients do): the kernel will pick the route's source address, so that is what
    // the server will see.
    Result<sockaddr_storage> src = RouteSource(peer, len);
    if (!src.ok()) return src.status();
    local = proto::CanonicalAddress(
        reinterpret_cast<sockaddr*>(&src.value()),
        src->ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    proto::PortField(local.value()) = port;
  }
  *named_later = port == 0;  // also bound with IP_BIND_ADDRESS_NO_PORT: connect() picks it
  proto::FourTuple tuple;
  tuple.client = local.value();
  tuple.server = proto::CanonicalAddress(peer, len);
  return ConnectStream(provider, peer, len, tuple);
}

// Sends the client's WAKEUP; for a channel filed with client port 0 it names the port connect()
// chose.
Status StartClient(SanSocket& s, proto::Stream& stream, bool named_later) {
  if (!named_later) return stream.Start();
  Result<sockaddr_storage> local = LocalAddress(s.fd);
  if (!local.ok()) return local.status();
  return stream.StartNamed(ntohs(proto::PortOf(local.value())));
}

}  // namespace

bool HoldsConnection(int fd, const sockaddr_storage& local, const sockaddr_storage& peer) {
  int type = 0;
  socklen_t tlen = sizeof type;
  if (kernel::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM) {
    return false;
  }
  Result<sockaddr_storage> mine = LocalAddress(fd);
  Result<sockaddr_storage> theirs = PeerAddress(fd);
  return mine.ok() && theirs.ok() && proto::SameAddress(mine.value(), local) &&
         proto::SameAddress(theirs.value(), peer);
}

Result<std::unique_ptr<proto::Stream>> ConnectStream(fabric::Provider& provider,
                                                     const sockaddr* rendezvous, socklen_t len,
                                                     const proto::FourTuple& tuple, int proof_fd,
                                                     int timeout_ms, int dialed_fd,
                                                     bool answer_later) {
  UniqueFd dialed(dialed_fd);  // closed here unless the endpoint's Connect takes it
  const proto::StreamParams params = Runtime::Get().StreamParamsFor(provider);
  Result<std::unique_ptr<fabric::Endpoint>> ep =
      provider.CreateEndpoint(proto::Stream::EndpointAttrFor(params));
  if (!ep.ok()) return ep.status();
  Result<std::unique_ptr<proto::Stream>> stream =
      proto::Stream::Create(std::move(ep).value(), provider.capabilities(), params);
  if (!stream.ok()) return stream.status();
  fabric::ConnectData request = proto::EncodeConnectRequest(tuple);
  request.proof_fd = proof_fd;
  request.timeout_ms = timeout_ms;
  request.dialed_fd = dialed.release();
  request.answer_later = answer_later;
  Status st = stream.value()->endpoint().Connect(rendezvous, len, request);
  if (!st.ok() && !(answer_later && st.code() == EINPROGRESS)) return st;
  return stream;
}

bool MakeHoldersPipe(SanSocket& s) {
  int holders[2];
  if (pipe2(holders, O_CLOEXEC | O_NONBLOCK) != 0) {
    s.holders_lost = true;
    return false;
  }
  s.holders_read.reset(PlaceHigh(holders[0]));
  s.holders_write.reset(PlaceHigh(holders[1]));
  s.holders_lost = false;
  if (!s.holders_counted) {
    s.holders_counted = true;
    CountHoldersPipes(1);
  }
  return true;
}

SanSocket::~SanSocket() {
  if (holders_counted) CountHoldersPipes(-1);
}

namespace {

void StartThreadIfConnectionNeedsIt(SanSocket& s, bool active) {
  // A process that put its connection thread off (ConnectionThread::StartsWithFirstSocket) starts
  // it for
  // - the first connection that stays kernel TCP for good: sanstat asks the thread for the reason;
  // - the first late candidate it connected: sanstat asks the thread about it too, and its move
  //   needs it (the lower end's rendezvous, the drive of a switch) -- though that would start it
  //   then. An accepted candidate does not start it, so an accept-then-fork server stays
  //   single-threaded until a connection of its moves.
  if (s.mode.load(std::memory_order_acquire) != SocketMode::kTcp || (s.late && !active)) return;
  if (Status st = Runtime::Get().connections().EnsureRunning(); !st.ok()) {
    SAN_LOG_WARN("connection thread: %s", st.ToString().c_str());
  }
}

}  // namespace

void Settle(SanSocket& s, std::unique_ptr<proto::Stream> stream, std::string reason) {
  if (stream) {
    if (s.nodelay_requested) stream->SetNoDelay(true);
    const bool moved = s.mode.load(std::memory_order_acquire) == SocketMode::kTcp;
    // Made at connect or accept: a raw clone's child right after accept (vsftpd isolate=YES) runs
    // no fork handler, and the parent's close must see its hold. A moved one gets it from the
    // first fork that shares it (fork_holders.h HoldAcrossFork).
    if (!moved) MakeHoldersPipe(s);
    // A kernel TCP connection moved to a stream (the late move, san_upgrade) was counted as TCP
    // when it settled first; from now on it counts as SAN only, so that SAN_REPORT adds up.
    if (moved) {
      Runtime::Get().usage().tcp_connections.fetch_sub(1);
    }
    Runtime::Get().CountSettled(stream.get());
    s.stream = std::move(stream);
    // kShm is "carried by a SAN stream", whichever provider; the stream's endpoint names it
    // (sanstat and san_getinfo say shm or verbs).
    s.mode.store(SocketMode::kShm, std::memory_order_release);
    NoteReadinessChange();  // epoll sets must look at it again (late_phase.h)
  } else {
    Runtime::Get().CountSettled(nullptr);
    s.fallback_reason = std::move(reason);
    s.mode.store(SocketMode::kTcp, std::memory_order_release);
    Runtime::Get().table().NoteChange();  // epoll sets drop it from their pending members
    SAN_LOG_INFO("fd %d: kernel TCP: %s", s.fd.load(), s.fallback_reason.c_str());
  }
}

SanSocket* Track(int fd, bool nonblocking) {
  Runtime& rt = Runtime::Get();
  // The connection thread answers sanstat for every SAN socket, listening or not; a
  // single-threaded process under the late set-up starts it only once it needs it.
  if (ConnectionThread::StartsWithFirstSocket(rt.config().late_setup)) {
    if (Status st = rt.connections().EnsureRunning(); !st.ok()) {
      SAN_LOG_WARN("connection thread: %s", st.ToString().c_str());
    }
  }
  if (rt.table().Find(fd)) ReleaseGhost(fd);  // the kernel just gave this number out
  auto* s = new SanSocket(fd);
  s->nonblocking.store(nonblocking);
  if (!rt.table().Insert(s)) {
    delete s;  // beyond the table's range: stays a plain kernel socket
    return nullptr;
  }
  return s;
}

void WaitForWindow(SanSocket& s) {
  // The peer's WAKEUP opens our window; it was sent before our set-up returned, so this is
  // normally immediate. Bounded (5 s): a dead peer shows up as an error on first use.
  for (int i = 0; i < 50; ++i) {
    const proto::Readiness r = s.stream->GetReadiness();
    if (r.writable || r.error) return;
    SleepOnSocket(s, true, 100);
  }
}

namespace {

// An fd-making call of the application (socket, accept) that failed with EMFILE: sanlib's own fds
// may have taken the room the kernel alone would have left. Gives back the optional ones (the eager
// rendezvous of listening sockets: their new clients are kernel TCP from now on) and tries again.
template <typename Call>
int RetryAfterFreeingFds(const char* what, Call call) {
  const int fd = call();
  if (fd >= 0 || errno != EMFILE) return fd;
  Runtime* rt = Runtime::IfCreated();
  const size_t released = rt ? rt->connections().ReleaseRendezvous() : 0;
  if (released == 0) {
    errno = EMFILE;
    return -1;
  }
  SAN_LOG_WARN(
      "%s: out of fds (EMFILE): closed the SAN rendezvous of %zu listening socket(s) to "
      "make room; their new connections are kernel TCP",
      what, released);
  return call();
}

}  // namespace

int SocketCreate(int domain, int type, int protocol) {
  Runtime::CheckMissedFork();
  const int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
  int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (base == SOCK_SAN) base = SOCK_STREAM;
  if (protocol == IPPROTO_TCP) protocol = 0;
  const int fd = RetryAfterFreeingFds(
      "socket", [&] { return kernel::socket(domain, base | flags, protocol); });
  if (fd < 0 || !IsInet(domain) || base != SOCK_STREAM || protocol != 0) return fd;
  Track(fd, flags & SOCK_NONBLOCK);
  return fd;
}

namespace {

// Whether the socket has its port already (bound): listen() will not pick one.
bool HasPort(int fd) {
  Result<sockaddr_storage> local = LocalAddress(fd);
  return local.ok() && proto::PortOf(local.value()) != 0;
}

}  // namespace

int Listen(int fd, int backlog) {
  Runtime::CheckMissedFork();
  Runtime& rt = Runtime::Get();
  SanSocket* s = rt.table().Find(fd);
  // Set before the rendezvous opens, so that a close or dup meanwhile ends or renames it (what
  // this call writes after a close from another thread is that program's race, as with any call
  // on an fd being closed). A second listen() only changes the backlog; a connected socket gets
  // the kernel's EINVAL.
  if (!s || s->mode.load() != SocketMode::kUnconnected || s->listening.exchange(true)) {
    return kernel::listen(fd, backlog);
  }
  // This host's rendezvous opens before the kernel's listener when the port is known: a client
  // that reaches the kernel's listener then finds the rendezvous too, so a server's first
  // connections (a health check, a launcher that waits for LISTEN) are accelerated like the rest
  // (docs/sockets.md "Listen: the rendezvous first"). An unbound socket learns its port from
  // listen(), and the other hosts' rendezvous (rdma_cm, which on iWARP takes the TCP port
  // itself) must not take the port from the application: both open after it.
  const bool host_first = HasPort(fd);
  bool in_use = false;
  if (host_first) OpenRendezvous(*s, fd, &in_use, RendezvousSet::kThisHost);
  if (kernel::listen(fd, backlog) != 0) {
    const int err = errno;
    // Nobody can accept what its clients connected to meanwhile: their channels are aborted.
    // Served here: opened above, or by a takeover meanwhile (another thread's accept found the
    // owner gone); both record this process as the owner.
    if (s->rendezvous_owner.load() == ThisPid()) {
      rt.connections().RemoveListener(fd, /*kernel_listened=*/false);
    }
    s->rendezvous_owner.store(0);
    s->listening.store(false);
    errno = err;
    return -1;
  }
  OpenRendezvous(*s, fd, &in_use, host_first ? RendezvousSet::kOtherHosts : RendezvousSet::kAll);
  return 0;
}

int Accept(int fd, sockaddr* addr, socklen_t* len, int flags) {
  Runtime::CheckMissedFork();
  Runtime& rt = Runtime::Get();
  SanSocket* ls = rt.table().Find(fd);
  if (!ls) return kernel::accept4(fd, addr, len, flags);
  CheckRendezvousOwner(*ls, fd);
  // The peer's address comes with the connection (no getpeername); the caller gets its copy.
  sockaddr_storage from{};
  socklen_t from_len = sizeof from;
  const int nfd = RetryAfterFreeingFds("accept", [&] {
    from_len = sizeof from;
    return kernel::accept4(fd, reinterpret_cast<sockaddr*>(&from), &from_len, flags);
  });
  if (nfd < 0) return nfd;
  if (addr && len) {
    memcpy(addr, &from, std::min<size_t>(*len, from_len));
    *len = from_len;
  }
  SanSocket* s = Track(nfd, flags & SOCK_NONBLOCK);
  if (!s) return nfd;
  std::unique_ptr<proto::Stream> stream;
  const sockaddr_storage peer =
      proto::CanonicalAddress(reinterpret_cast<sockaddr*>(&from), from_len);
  // No process serves a rendezvous for this socket (SAN_SETUP=late on this host, or nobody took
  // it over): no client can have set up a channel.
  Result<sockaddr_storage> local = ls->rendezvous_owner.load() != 0
                                       ? LocalAddress(nfd)
                                       : Result<sockaddr_storage>(Status(ENOENT, "no rendezvous"));
  if (local.ok()) {
    proto::FourTuple tuple;
    tuple.client = peer;
    tuple.server = local.value();
    Result<std::unique_ptr<proto::Stream>> found = FindChannel(*ls, ls->fd.load(), nfd, tuple);
    if (found.ok()) {
      stream = std::move(found).value();
    } else {
      // The client is on a SAN channel we cannot reach: as TCP this connection would hang (the
      // client waits on the channel). Reset it, as the kernel does a connection that failed
      // before accept() returned it: ECONNABORTED, and the caller accepts the next one.
      SAN_LOG_WARN("fd %d: SAN channel handover failed (%s); connection reset", nfd,
                   found.status().ToString().c_str());
      Release(nfd);
      const linger reset{1, 0};
      kernel::setsockopt(nfd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      kernel::close(nfd);
      errno = ECONNABORTED;
      return -1;
    }
  }
  // A candidate for the late move says so: whatever the client is, the move will tell. (The
  // reason is made once, for a TCP connection only: a short connection's accept is hot.)
  fabric::Provider* late = stream ? nullptr : LateProviderFor(peer);
  std::string reason;
  if (late) {
    reason = rt.config().late_setup
                 ? "not moved to shm yet (late set-up)"
                 : "peer did not set up a SAN channel (plain TCP, late set-up or other "
                   "user): may move to shm later";
  } else if (!stream && rt.connections().released_for_fds()) {
    reason = "no SAN channel: this process ran out of fds (EMFILE) and closed its SAN rendezvous";
  } else if (!stream && rt.SanEnabled(&reason)) {
    // This side has SAN (otherwise SanEnabled gave the reason, SAN_PROVIDER=off or no
    // provider, as on the client side: docs/sockets.md, fallback reasons).
    reason = "peer did not set up a SAN channel (not a sanlib client, or not local)";
  }
  Settle(*s, std::move(stream), std::move(reason));
  if (late) ConsiderLateUpgrade(*s, false, peer, late);
  StartThreadIfConnectionNeedsIt(*s, false);
  return nfd;
}

int Connect(int fd, const sockaddr* addr, socklen_t len) {
  Runtime::CheckMissedFork();
  Runtime& rt = Runtime::Get();
  SanSocket* s = rt.table().Find(fd);
  if (!s || s->listening.load() || s->mode.load() != SocketMode::kUnconnected || !addr ||
      len < sizeof(sockaddr_in) || !IsInet(addr->sa_family)) {
    return kernel::connect(fd, addr, len);  // the kernel gives EISCONN, EALREADY, EINVAL, ...
  }
  std::string reason;
  std::unique_ptr<proto::Stream> stream;
  fabric::Provider* provider = rt.ProviderFor(addr, len, &reason);
  if (provider && rt.config().late_setup && provider->kind() == fabric::ProviderKind::kShm) {
    // The late set-up: kernel TCP now, shm once the connection has proved itself.
    provider = nullptr;
    reason = "not moved to shm yet (late set-up)";
  }
  if (provider && !ChannelFitsFdBudget(&reason)) provider = nullptr;
  bool named_later = false;
  if (provider) {
    Result<std::unique_ptr<proto::Stream>> r = SetUpChannel(*s, *provider, addr, len, &named_later);
    if (r.ok()) {
      stream = std::move(r).value();
    } else if (r.status().code() == EACCES) {
      // The listener's process runs as another user; the late upgrade proves the connection
      // (its kernel socket) instead of the uid.
      reason =
          "the peer's SAN listener runs as another user: kernel TCP until the connection has "
          "lived SAN_UPGRADE_DELAY_US, then shm (proved by the TCP connection itself) if "
          "SAN_PEER_USERS at both ends allows";
    } else if (r.status().code() == EDQUOT) {
      reason = "no SAN channel: the peer's SAN channels hold a quarter of its fd limit";
    } else if (r.status().code() == ECONNREFUSED) {
      reason = "no SAN listener at the peer (plain TCP server)";
      if (provider->kind() != fabric::ProviderKind::kShm) {
        reason.append(" [").append(provider->name()).append("]");
      }
    } else {
      // e.g. "SAN set-up failed: verbs: rdma_resolve_addr: No route to host"
      reason = "SAN set-up failed: ";
      reason.append(provider->name()).append(": ").append(r.status().ToString());
    }
  }
  const int rc = kernel::connect(fd, addr, len);
  const int err = errno;
  if (rc != 0 && err != EINPROGRESS) {
    if (stream) stream->Abort();
    errno = err;
    return -1;
  }
  if (stream && !StartClient(*s, *stream, named_later).ok()) {
    reason = "SAN set-up failed: WAKEUP could not be sent";
    stream->Abort();
    stream.reset();
  }
  const bool wait_for_window = stream && rc == 0;
  if (stream && rc != 0) s->connecting.store(true);  // EINPROGRESS: poll/SO_ERROR finish it
  const bool tcp = !stream;
  Settle(*s, std::move(stream), std::move(reason));
  if (tcp) {
    const sockaddr_storage peer = proto::CanonicalAddress(addr, len);
    ConsiderLateUpgrade(*s, true, peer, LateProviderFor(peer));
    StartThreadIfConnectionNeedsIt(*s, true);
  }
  if (wait_for_window && !s->nonblocking.load()) WaitForWindow(*s);
  if (rc != 0) errno = err;
  return rc;
}

int Shutdown(int fd, int how) {
  SanSocket* s = Runtime::Get().table().Find(fd);
  // A candidate moves now or never: a shutdown on the kernel socket would put its FIN among the
  // bytes counted at the switch, and its wake byte after the FIN.
  const bool valid = how == SHUT_RD || how == SHUT_WR || how == SHUT_RDWR;
  if (s && valid && LatePending(*s)) EndLateUpgrade(*s, true, "shut down before the move");
  if (!s || s->mode.load(std::memory_order_acquire) != SocketMode::kShm) {
    return kernel::shutdown(fd, how);
  }
  if (!valid) {
    errno = EINVAL;
    return -1;
  }
  // The kernel socket is left alone: its FIN would tell the peer we died.
  if (how != SHUT_WR) s->read_shut.store(true);
  if (how != SHUT_RD) s->stream->ShutdownWrite();
  // Moved to TCP (tcp_move.h): the relay applies the shutdown to the kernel socket once it is done.
  if (s->stream->Moved()) AdvanceMoved(*s);
  WakeSleepers(*s);
  return 0;
}

namespace {

// Drops this process's hold on the connection; true if no other process holds it any more (the
// caller is the one to close it). See SanSocket::holders_write.
bool DropOwnHold(SanSocket& s, proto::Stream& stream) {
  if (!s.holders_read.valid()) return stream.DropUser();
  s.holders_write.reset();
  pollfd p{s.holders_read.get(), POLLIN, 0};
  return kernel::poll(&p, 1, 0) == 1 && (p.revents & POLLHUP);
}

}  // namespace

void NoteDuplicate(int fd, int dup_fd) {
  Runtime* rt = Runtime::IfCreated();
  SanSocket* s = rt ? rt->table().Find(fd) : nullptr;
  if (!s || dup_fd == fd || Runtime::InVforkChild()) return;
  if (rt->table().Find(dup_fd)) ReleaseGhost(dup_fd);  // the kernel just gave that number out
  s->fd_count.fetch_add(1);
  if (!rt->table().InsertAs(dup_fd, s)) {
    // Beyond the table (fd >= 2^20): that number reads the kernel socket, which carries nothing.
    s->fd_count.fetch_sub(1);
    SAN_LOG_WARN("fd %d: duplicate %d is beyond the socket table; it will not see SAN data", fd,
                 dup_fd);
  }
}

namespace {

enum class Number {
  kSocket,      // still names the socket (close)
  kGhost,       // the kernel just gave it out again: what we hold there is a ghost
  kMaybeGhost,  // the sweep found a ghost: looked at again under the lock
};

// Release, for a number that still names the socket or a ghost's.
void ReleaseNumber(int fd, Number number) {
  const bool kernel_fd_valid = number == Number::kSocket;
  Runtime* rt_or_null = Runtime::IfCreated();
  if (!rt_or_null || !rt_or_null->table().Find(fd)) return;
  Runtime& rt = *rt_or_null;
  // Not while another thread holds sockets pinned across a sleep (epoll_wait: EpollSet::Wait).
  auto lifetime = rt.table().LockLifetime();
  // A ghost is looked at again under the lock: its number may have been put back meanwhile (an
  // exec's placeholders, undone when the exec fails).
  if (number == Number::kMaybeGhost) {
    SanSocket* found = rt.table().Find(fd);
    if (!found || !IsGhost(fd, *found)) return;
  }
  SanSocket* s = rt.table().Remove(fd);
  if (!s) return;
  if (s->fd_count.fetch_sub(1) > 1) {
    // Another number (dup) still names the socket: only this one goes, as with the kernel.
    if (s->fd.load() == fd) {
      const int other = rt.table().AnotherFdOf(s, fd);
      s->fd.store(other);
      if (s->listening.load()) rt.connections().RenameListener(fd, other);
    }
    return;
  }
  if (s->listening.load()) rt.connections().RemoveListener(fd);
  if (LatePending(*s)) CloseLateUpgrade(*s);
  if (std::unique_ptr<proto::Stream> stream = std::move(s->stream)) {
    rt.closer().Forget(stream.get());
    if (!DropOwnHold(*s, *stream)) {
      // Another process (fork) still holds the connection: only our view of it goes (its bytes
      // are counted by the last holder, so that SAN_REPORT lines add up).
      delete s;
      return;
    }
    rt.CountFinished(*stream);
    if (stream->Available() > 0 && !stream->Moved()) {
      stream->Abort();  // unread data: the kernel resets the connection, so do we
    } else {
      stream->ShutdownWrite();
    }
    // The close thread keeps its own reference to the kernel socket: the peer watches it for
    // liveness, and the application's fd number must be free when close() returns. A ghost's
    // kernel socket is gone already.
    UniqueFd keep(kernel_fd_valid ? DupHigh(fd) : -1);
    rt.closer().Adopt(std::move(stream), std::move(keep), rt.config().linger_ms);
  }
  delete s;
}

void ReleaseGhostNumber(int fd, Number number) {
  SAN_LOG_INFO("fd %d: closed without close() (a raw system call): its SAN socket is released", fd);
  ReleaseNumber(fd, number);
}

}  // namespace

void Release(int fd) { ReleaseNumber(fd, Number::kSocket); }

bool IsGhost(int fd, SanSocket& s) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno == EBADF;
  if (!S_ISSOCK(st.st_mode)) return true;
  ino_t known = 0;
  // The first look: this is the socket (compare_exchange: the sweep and a release may both look).
  if (s.kernel_ino.compare_exchange_strong(known, st.st_ino)) return false;
  return known != st.st_ino;
}

void ReleaseGhost(int fd) { ReleaseGhostNumber(fd, Number::kGhost); }

void SweepGhosts() {
  Runtime* rt = Runtime::IfCreated();
  if (!rt) return;
  std::vector<int> ghosts;
  {
    auto pin = rt->table().Pin();
    rt->table().ForEachNumber([&](int fd, SanSocket* s) {
      if (IsGhost(fd, *s)) ghosts.push_back(fd);
    });
  }
  for (int fd : ghosts) ReleaseGhostNumber(fd, Number::kMaybeGhost);  // looked at again
}

bool VforkChildKeeps(int fd) {
  return InOwnPlace(fd) && Runtime::InVforkChild() && kernel::CloseOnExec(fd);
}

int Close(int fd) {
  // A vfork child closes its own copy; the socket and the table are its parent's.
  if (Runtime::InVforkChild()) return VforkChildKeeps(fd) ? 0 : kernel::close(fd);
  Runtime::CheckMissedFork();
  Release(fd);
  EpollClosed(fd);
  return kernel::close(fd);
}

void ShutdownAllForExit() {
  Runtime& rt = Runtime::Get();
  // Other threads still run at exit (gRPC's close fds while the main thread exits): a Release on
  // one of these sockets would delete it, or hand its stream to the close thread, under our feet.
  // Held to the end: `shut` and `relaying` point into sockets the table still owns.
  auto lifetime = rt.table().LockLifetime();
  std::vector<int> fds;
  rt.table().ForEach([&](SanSocket* s) {
    if (s->stream) fds.push_back(s->fd);
  });
  std::vector<proto::Stream*> shut;
  std::vector<SanSocket*> relaying;  // the peer moved them to TCP: the relay is what is owed
  for (int fd : fds) {
    if (SanSocket* s = rt.table().Find(fd)) {
      if (s->stream) {
        rt.closer().Forget(s->stream.get());
        if (DropOwnHold(*s, *s->stream)) {
          rt.CountFinished(*s->stream);
          s->stream->ShutdownWrite();  // flushes, then FIN
          shut.push_back(s->stream.get());
          if (s->stream->Moved()) relaying.push_back(s);
        }
      }
    }
  }
  // Bytes still in a combine buffer go out only with a credit, and the FIN after them: wait for
  // the peer to return one (bounded by the linger). Once the FIN is posted, everything before it is
  // in the peer's buffers and exiting loses nothing.
  const uint64_t deadline = NowNs() + uint64_t{rt.config().linger_ms} * 1000000;
  for (;;) {
    shut.erase(std::remove_if(shut.begin(), shut.end(),
                              [](proto::Stream* st) { return st->NothingLeftToPost(); }),
               shut.end());
    relaying.erase(std::remove_if(relaying.begin(), relaying.end(),
                                  [](SanSocket* s) { return !AdvanceMoved(*s).would_block(); }),
                   relaying.end());
    if ((shut.empty() && relaying.empty()) || NowNs() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

namespace {

SAN_FORK_PATH void BecomeAUser(SanSocket* s) {
  if (s->stream) s->stream->AddUser();
}

}  // namespace

SAN_FORK_PATH void NoteForkChild() {
  // Connection state is in shared memory, so the child's view is the parent's; it becomes one more
  // user of every connection it inherited, and the connection lives until the last user closes.
  // (Who is last is decided by SanSocket::holders_write; this count is only the fallback for a
  // socket whose holders pipe could not be made.)
  Runtime::Get().table().ForEachPlain(&BecomeAUser);
}

}  // namespace san
