#include "sanlib/socket/late_upgrade.h"

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sanlib/common/clock.h"
#include "sanlib/common/fnv1a.h"
#include "sanlib/common/log.h"
#include "sanlib/common/peer_uid.h"
#include "sanlib/fabric/address.h"
#include "sanlib/socket/drive.h"
#include "sanlib/socket/fd_budget.h"
#include "sanlib/socket/iov_remainder.h"
#include "sanlib/socket/kernel.h"
#include "sanlib/socket/late_fork.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

namespace san {
namespace {

constexpr uint64_t kMs = 1000000;
// The lower end keeps its private rendezvous open this long for the upper end to come.
constexpr uint64_t kListenForNs = 10000 * kMs;
// The upper end tries this many times, 0.1, 0.2, 0.4 ... ms apart, then every 1.6 s (some fifteen
// seconds in all: the lower end opens its side at its first data call after the delay, or from
// its connection thread). The first tries come soon: a connection proved by its bytes is in the
// middle of a bulk transfer, which may be over in a few milliseconds.
constexpr uint64_t kRetryBaseNs = kMs / 10;
constexpr uint32_t kMaxAttempts = 24;
constexpr uint32_t kDoublings = 14;
// How long the upper end waits for the lower end's connection thread to answer its connect (it
// looks at each of its data calls, never waiting in one); past it the connection stays TCP.
constexpr int kConnectWaitMs = 200;
// How long a read woken only by the peer's wake byte waits for the stream's first bytes (the
// peer switched in the middle of an exchange, and its next bytes wait for our WAKEUP), even if
// the socket is nonblocking: once per connection, instead of an EAGAIN the program did not expect
// after a readiness.
constexpr uint64_t kAfterWakeNs = kMs / 2;
// How long a nonblocking send right after the switch waits for the peer's WAKEUP (AwaitPeerWindow).
constexpr uint64_t kPeerWindowWaitNs = 5 * kMs;
// Once a connection has proved itself by its bytes, a blocking bulk send goes to the kernel in
// parts of this size, with a set-up step between them, until the socket switches.
constexpr uint64_t kPartBytes = 256 << 10;
// How long the end of a move (close, shutdown, fd passing) at the lower end waits for the upper
// end's switch, which obliges it to follow (EndLateUpgrade).
constexpr uint64_t kPeerSwitchedWaitNs = 200 * kMs;

std::atomic<int> next_token{-2};

uint64_t HashTuple(const proto::FourTuple& t) {
  uint64_t h = kFnv1aSeed;
  for (const sockaddr_storage* a : {&t.client, &t.server}) {
    h = Fnv1a(a, a->ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6), h);
  }
  return h;
}

sockaddr_in6 RendezvousOf(const LateUpgrade& u) {
  const uint64_t h = HashTuple(u.tuple);
  return fabric::PrivateRendezvousAddress(h, static_cast<uint16_t>(h >> 48));
}

bool ReadTcpInfo(int fd, tcp_info* ti) {
  socklen_t len = sizeof *ti;
  return kernel::getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0 &&
         len >= offsetof(tcp_info, tcpi_bytes_received) + sizeof ti->tcpi_bytes_received;
}

// A counter of TCP_INFO plus the queue `request` reports (SIOCOUTQ, SIOCINQ), read consistently:
// the queue is read around the counter until it holds still, so a segment or an ACK in between
// cannot skew the pair. Returns counter + queue * sign.
template <typename Counter>
Result<uint64_t> CounterAndQueue(int fd, unsigned long request, Counter counter, int sign) {
  for (int i = 0; i < 16; ++i) {
    int before = 0, after = 0;
    tcp_info ti{};
    if (kernel::ioctl(fd, request, &before) != 0) return Status::FromErrno("ioctl(queue)");
    if (!ReadTcpInfo(fd, &ti)) return Status(ENOTSUP, "TCP_INFO");
    if (kernel::ioctl(fd, request, &after) != 0) return Status::FromErrno("ioctl(queue)");
    if (before == after) return counter(ti) + static_cast<uint64_t>(sign * int64_t{after});
  }
  return Status(EAGAIN, "a socket queue never held still");
}

// Bytes the application wrote to the kernel socket so far: acknowledged + still queued (an
// active opener's count of acknowledged bytes includes its SYN).
Result<uint64_t> KernelBytesWritten(int fd, bool active) {
  return CounterAndQueue(
      fd, SIOCOUTQ, [&](const tcp_info& ti) { return ti.tcpi_bytes_acked - (active ? 1 : 0); }, 1);
}

// Whether the peer's FIN has arrived (TCP_INFO's state; the numbers of netinet/tcp.h's states,
// which cannot be included beside linux/tcp.h).
bool FinReceived(const tcp_info& ti) {
  constexpr uint8_t kTimeWait = 6, kCloseWait = 8, kLastAck = 9, kClosing = 11;
  const uint8_t state = ti.tcpi_state;
  return state == kCloseWait || state == kLastAck || state == kClosing || state == kTimeWait;
}

// Bytes the application consumed from the kernel socket so far (received - still queued). The
// kernel counts the peer's FIN in bytes received, and SIOCINQ leaves it out: once it has come,
// the difference is one more than the bytes read. (A peer that switched and was then killed sent
// its FIN after its wake byte; the count one too high read as "unseen reads", the move failed,
// and the wake byte went to the program as data.)
Result<uint64_t> KernelBytesConsumed(int fd) {
  return CounterAndQueue(
      fd, SIOCINQ,
      [](const tcp_info& ti) { return ti.tcpi_bytes_received - (FinReceived(ti) ? 1 : 0); }, -1);
}

// Waits, yielding the CPU, until the stream's readiness satisfies `ready` or `for_ns` passed;
// true if it did.
template <typename Ready>
bool AwaitStream(SanSocket& s, uint64_t for_ns, Ready ready) {
  const uint64_t until = NowNs() + for_ns;
  for (;;) {
    if (ready(s.stream->GetReadiness())) return true;
    if (NowNs() >= until) return false;
    sched_yield();
  }
}

// After the peer's wake byte alone woke a read: waits (bounded by kAfterWakeNs) for the stream's
// first bytes, even on a nonblocking socket -- once per connection, rather than an EAGAIN that a
// program reading once per readiness takes for an error (wrk does).
void AwaitFirstBytes(SanSocket& s) {
  AwaitStream(s, kAfterWakeNs, [](const proto::Readiness& r) { return r.readable; });
}

}  // namespace

void AwaitPeerWindow(SanSocket& s) {
  LateUpgrade& u = *s.late;
  if (u.window_seen.load(std::memory_order_relaxed)) return;
  if (AwaitStream(s, kPeerWindowWaitNs,
                  [](const proto::Readiness& r) { return r.writable || r.error; })) {
    u.window_seen.store(true, std::memory_order_relaxed);
  }
}

namespace {

// The socket is kShm on the candidate's stream from now on (mu held): kShm first, then no longer
// pending (SanlibCarries).
void SwitchedLocked(SanSocket& s, LateUpgrade& u) {
  u.phase.store(LatePhase::kSwitched);
  Settle(s, std::move(u.stream), "");
  s.late_pending.store(false, std::memory_order_release);
}

// The lower end gives up after the upper end switched (its WAKEUP is on the stream, its wake byte
// on its way over TCP, its next bytes on the stream): staying kernel TCP would hand the program
// that wake byte as data and then wait for bytes that never come over TCP. The socket switches
// all the same, on the aborted stream: reads return the peer's TCP bytes up to its count, then
// ECONNRESET, as from a kernel socket its peer reset (the peer, if alive, gets ECONNRESET too).
void SwitchAbortedLocked(SanSocket& s, LateUpgrade& u, const std::string& why) {
  SAN_LOG_INFO("fd %d: the peer moved to shm and this end cannot follow (%s): reset", s.fd.load(),
               why.c_str());
  SwitchedLocked(s, u);
  WakeSleepers(s);
}

// Gives up on moving the connection (it stays kernel TCP). A stream already made is aborted, so
// a peer that switched learns it at once (ECONNRESET) instead of waiting on a silent channel.
void FailLocked(SanSocket& s, LateUpgrade& u, const std::string& why) {
  if (u.token != 0 && !u.stream)
    u.stream = Runtime::Get().connections().CloseLateListener(u.token, u.tuple);
  u.token = 0;
  if (u.stream) {
    u.stream->Abort();
    // Whether the peer switched is asked after the abort, which the peer asks before it sends its
    // wake byte (TrySwitch): one of the two ends sees the other's step (the fence orders our
    // write of the abort before our read of its WAKEUP).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (u.lower && u.stream->PeerTcpBytes()) return SwitchAbortedLocked(s, u, why);
    u.stream.reset();
  }
  SAN_LOG_INFO("fd %d: stays kernel TCP (not moved to shm: %s)", s.fd.load(), why.c_str());
  u.failure = "move failed: " + why;
  u.phase.store(LatePhase::kFailed);
  s.late_pending.store(false, std::memory_order_release);
}

// The lower end stops listening (mu held, phase kListening): true if the peer came all the same
// (then the phase is kReady: the peer may switch as soon as it holds its half, so this end must
// not give up now); false if it did not, and no longer can.
bool TakeLastComer(LateUpgrade& u) {
  std::unique_ptr<proto::Stream> got =
      Runtime::Get().connections().CloseLateListener(u.token, u.tuple);
  u.token = 0;
  if (!got) return false;
  u.stream = std::move(got);
  u.phase.store(LatePhase::kReady);
  return true;
}

// Whether the connection has proved itself by use -- carried SAN_UPGRADE_BYTES over TCP, or
// SAN_UPGRADE_CALLS data calls that moved bytes -- so the delay no longer applies.
bool ProvedByUse(const LateUpgrade& u) {
  const Config& config = Runtime::Get().config();
  const uint64_t bytes = config.upgrade_bytes;
  const uint32_t calls = config.upgrade_calls;
  return (bytes != 0 && u.carried.load(std::memory_order_relaxed) >= bytes) ||
         (calls != 0 && u.calls.load(std::memory_order_relaxed) >= calls);
}

// Whether the upper end's request reached the peer's side: the channel is made, or its answer is
// on the way.
bool Underway(LatePhase phase) {
  return phase == LatePhase::kAnswering || phase == LatePhase::kReady;
}

// Counts a kernel data call on the candidate that moved n bytes.
void CountUse(LateUpgrade& u, ssize_t n) {
  if (n <= 0) return;
  u.carried.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  u.calls.fetch_add(1, std::memory_order_relaxed);
}

// How many bytes a blocking send may hand the kernel in one part (late_upgrade.h).
uint64_t PartLimit(const LateUpgrade& u) {
  const uint64_t threshold = Runtime::Get().config().upgrade_bytes;
  if (threshold == 0) return ~uint64_t{0};
  const uint64_t carried = u.carried.load(std::memory_order_relaxed);
  return carried < threshold ? threshold - carried : kPartBytes;
}

// Our end's address (roles known).
const sockaddr_storage& OwnAddress(const LateUpgrade& u) {
  return u.lower ? u.tuple.server : u.tuple.client;
}

// SAN_PEER_USERS (common/peer_users.h): may the peer's user be our SAN peer? Asks the kernel
// who owns the peer's socket only when the policy restricts (the default costs nothing).
bool PeerUserAllowed(const LateUpgrade& u, std::string* why) {
  const PeerUsers& policy = Runtime::Get().config().peer_users;
  if (policy.allows_everyone()) return true;
  Result<uid_t> uid = LookupPeerUidHere(OwnAddress(u), u.peer);
  if (!uid.ok()) {
    *why = "SAN_PEER_USERS=" + policy.text() + ": the peer's user is unknown (" +
           uid.status().ToString() + ")";
    return false;
  }
  if (policy.Allows(*uid, geteuid())) return true;
  *why = "SAN_PEER_USERS=" + policy.text() + " does not allow the peer's user (uid " +
         std::to_string(*uid) + ")";
  return false;
}

// The peer never took part in the move: says which user it runs as when that is not ours (its
// SAN_PEER_USERS may have refused us).
std::string NeverTookPart(const LateUpgrade& u, const char* what) {
  Result<uid_t> uid = LookupPeerUidHere(OwnAddress(u), u.peer);
  if (uid.ok() && *uid != geteuid()) {
    return std::string("the peer (uid ") + std::to_string(*uid) + ") " + what +
           ": its SAN_PEER_USERS may refuse our user";
  }
  return std::string("the peer ") + what + " (not a sanlib process?)";
}

// Which end we are (mu held): learned once, at the first step (a connection that never gets
// there costs no getsockname).
Status LearnRoles(SanSocket& s, LateUpgrade& u) {
  if (u.roles_known) return Status::Ok();
  Result<sockaddr_storage> local = LocalAddress(s.fd);
  if (!local.ok()) return local.status();
  u.lower = AddressLess(local.value(), u.peer);
  u.tuple.client = u.lower ? u.peer : local.value();
  u.tuple.server = u.lower ? local.value() : u.peer;
  u.roles_known = true;
  return Status::Ok();
}

// The upper end's attempt to reach the lower end's side failed with `why` (mu held, phase
// kConnecting): a refusal (the side is not open yet, or full) is tried again with backoff, up to
// kMaxAttempts; anything else leaves the connection TCP.
void RetryOrFailLocked(SanSocket& s, LateUpgrade& u, const Status& why, uint64_t now) {
  if (why.code() != ECONNREFUSED) {
    FailLocked(s, u, why.ToString());
  } else if (++u.attempts >= kMaxAttempts) {
    FailLocked(s, u, NeverTookPart(u, "never opened its side"));
  } else {
    u.next_ns = now + (kRetryBaseNs << std::min(u.attempts - 1, kDoublings));
  }
}

// The set-up steps that are due (mu held).
void Advance(SanSocket& s, LateUpgrade& u) {
  Runtime& rt = Runtime::Get();
  const uint64_t now = NowNs();
  switch (u.phase.load()) {
    case LatePhase::kWaiting: {
      if (now < u.next_ns && !ProvedByUse(u)) return;
      if (!SoleHolder(s, now)) return;  // another process holds it too (fork): not yet
      if (Status st = LearnRoles(s, u); !st.ok()) return FailLocked(s, u, st.ToString());
      if (std::string why; !PeerUserAllowed(u, &why)) return FailLocked(s, u, why);
      if (std::string why; !ChannelFitsFdBudget(&why)) return FailLocked(s, u, why);
      u.next_ns = now;  // due now, whether by time or by bytes
      if (!u.lower) {
        u.phase.store(LatePhase::kConnecting);
        return Advance(s, u);
      }
      if (rt.connections().late_listener_count() >= ConnectionThread::kMaxLateListeners) {
        // Enough moves in flight: this one waits its turn (the upper end's attempts meanwhile
        // are refused at once and retried, late_upgrade.h).
        u.next_ns = now + LateTurnWaitNs();
        rt.connections().ScheduleLate(s.fd, s.id, u.next_ns);
        return;
      }
      const proto::StreamParams params = rt.StreamParamsFor(*u.provider);
      const sockaddr_in6 where = RendezvousOf(u);
      Result<std::unique_ptr<fabric::Listener>> l =
          u.provider->ListenProved(reinterpret_cast<const sockaddr*>(&where), sizeof where,
                                   proto::Stream::EndpointAttrFor(params));
      if (!l.ok()) return FailLocked(s, u, "rendezvous: " + l.status().ToString());
      sockaddr_storage addr{};
      std::memcpy(&addr, &where, sizeof where);
      u.token = next_token.fetch_sub(1);
      u.give_up_ns = now + kListenForNs;
      // kListening before the peer can come: a read that meets the peer's wake byte must find
      // the phase that makes it look for the peer's count (PeerEnd), or it takes the byte for data.
      u.phase.store(LatePhase::kListening);
      Status st =
          rt.connections().AddListener(u.token, addr, std::move(l).value(),
                                       u.provider->capabilities(), params, true, s.fd.load(), s.id);
      if (!st.ok()) {
        u.token = 0;
        return FailLocked(s, u, "connection thread: " + st.ToString());
      }
      return;
    }
    case LatePhase::kConnecting: {
      if (now < u.next_ns) return;
      const sockaddr_in6 where = RendezvousOf(u);
      // Dialled first: until the lower end opens its side (it may wait its turn behind
      // kMaxLateListeners other moves) a refusal costs a socket and a connect, not a segment
      // built and torn down again.
      Result<UniqueFd> dialed =
          u.provider->Dial(reinterpret_cast<const sockaddr*>(&where), sizeof where);
      // Our kernel socket goes along as proof: the peer may be another user.
      Result<std::unique_ptr<proto::Stream>> r =
          !dialed.ok() && dialed.status().code() != ENOTSUP
              ? Result<std::unique_ptr<proto::Stream>>(dialed.status())
              : ConnectStream(*u.provider, reinterpret_cast<const sockaddr*>(&where), sizeof where,
                              u.tuple, s.fd.load(), kConnectWaitMs,
                              dialed.ok() ? dialed.value().release() : -1, true);
      if (!r.ok()) return RetryOrFailLocked(s, u, r.status(), now);
      // The lower end's connection thread builds its half and answers; this data call does not
      // wait for it (conn-bench hold: 10,000 idle connections echoing once each, in order, took
      // 0.4-1.9 s instead of TCP's 0.08 s, a few ms per connection that moved).
      u.stream = std::move(r).value();
      u.phase.store(LatePhase::kAnswering);
      // An application that makes no further call soon (an idle connection) is switched by the
      // connection thread: the lower end, holding its half, waits for our WAKEUP at its close.
      rt.connections().ScheduleDrive(s.fd, s.id);
      [[fallthrough]];
    }
    case LatePhase::kAnswering: {
      Status st = u.stream->endpoint().FinishConnect(0);
      if (st.ok()) {
        u.phase.store(LatePhase::kReady);
      } else if (st.code() != EINPROGRESS) {
        u.stream.reset();
        u.phase.store(LatePhase::kConnecting);
        RetryOrFailLocked(s, u, st, now);
      }
      return;
    }
    case LatePhase::kListening: {
      if (std::unique_ptr<proto::Stream> got = rt.connections().Claim(u.token, u.tuple)) {
        rt.connections().RemoveListener(u.token);
        u.token = 0;
        u.stream = std::move(got);
        u.phase.store(LatePhase::kReady);
      } else if (now > u.give_up_ns && !TakeLastComer(u)) {
        FailLocked(s, u, NeverTookPart(u, "never came"));
      }
      return;
    }
    default:
      return;
  }
}

// Switches both directions to the stream (mu held, phase kReady). Nothing happens unless no
// thread of ours is in a kernel call on the socket and the send queue has room for the wake byte.
void TrySwitch(SanSocket& s, LateUpgrade& u) {
  // The upper end goes first; the lower end follows its WAKEUP, so every wake byte reaches an
  // end that holds the stream which tells where it lies.
  if (u.lower && !u.stream->PeerTcpBytes()) return;
  const int fd = s.fd.load();
  int queued = 0, sndbuf = 0;
  socklen_t len = sizeof sndbuf;
  if (kernel::ioctl(fd, SIOCOUTQ, &queued) != 0 ||
      kernel::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) != 0) {
    return FailLocked(s, u, "send queue unknown");
  }
  if (!u.lower && queued > sndbuf / 2) return;  // no room for the wake byte: later
  // No reader in the kernel socket either (lock order: in_mu before mu, so only try it here).
  std::unique_lock<std::mutex> reading(u.in_mu, std::try_to_lock);
  if (!reading.owns_lock()) return;
  uint32_t idle = 0;
  if (!u.io.compare_exchange_strong(idle, LateUpgrade::kSwitching)) return;
  Result<uint64_t> written = KernelBytesWritten(fd, u.active);
  Result<uint64_t> consumed = KernelBytesConsumed(fd);
  Status st = !written.ok() ? written.status() : !consumed.ok() ? consumed.status() : Status::Ok();
  // Our own count must agree with the kernel's: a read we did not see (a raw system call) would
  // put the peer's wake byte in the wrong place.
  if (st.ok() && consumed.value() != u.consumed) st = Status(EPROTO, "unseen reads");
  if (st.ok()) st = u.stream->Start(written.value());
  if (st.ok() && !u.lower) {
    // A lower end that gave up aborts the stream before it looks for our WAKEUP (FailLocked):
    // looked at after our WAKEUP went out, so that one of the two ends sees the other's step.
    // Our wake byte must not follow an abort: the peer stays TCP and would read it as data.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (const int error = u.stream->GetReadiness().error; error != 0) {
      st = Status(error, "the peer gave the move up");
    }
  }
  if (st.ok() && !u.lower) {
    // Only the upper end's wake byte is needed: the lower end may be asleep in the kernel when
    // we switch; the upper end, switched already, watches the stream by then.
    const char wake = 0;
    if (kernel::send(fd, &wake, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
      st = Status::FromErrno("send(wake byte)");
    }
  }
  if (!st.ok()) {
    u.io.store(0);
    return FailLocked(s, u, "switch: " + st.ToString());
  }
  // The peer's part may be read already (the upper end's wake byte came before our switch).
  if (u.peer_wake_taken) u.inflow_done.store(true);
  SAN_LOG_INFO("fd %d: moved to shm after %llu bytes out and %llu in over kernel TCP", fd,
               static_cast<unsigned long long>(written.value()),
               static_cast<unsigned long long>(u.consumed));
  SwitchedLocked(s, u);
  u.io.store(0);
  WakeSleepers(s);
}

// Copies iov, cut to at most `limit` bytes.
std::vector<iovec> Limited(const iovec* iov, int iovcnt, uint64_t limit) {
  std::vector<iovec> out;
  for (int i = 0; i < iovcnt && limit > 0; ++i) {
    iovec v = iov[i];
    v.iov_len = std::min<uint64_t>(v.iov_len, limit);
    limit -= v.iov_len;
    out.push_back(v);
  }
  return out;
}

// The peer's WAKEUP count, if it came (in_mu held).
std::optional<uint64_t> PeerEnd(LateUpgrade& u, SanSocket& s) {
  if (s.mode.load(std::memory_order_acquire) == SocketMode::kShm) return s.stream->PeerTcpBytes();
  // Before our own switch only the lower end can meet the peer's wake byte (the upper end
  // switches first), and it may still have to take its half from the connection thread.
  const LatePhase phase = u.phase.load();
  if ((phase != LatePhase::kListening && phase != LatePhase::kReady) || !u.lower) {
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(u.mu);  // in_mu, then mu: TrySwitch only tries in_mu
  if (u.phase.load() == LatePhase::kListening) Advance(s, u);
  return u.stream ? u.stream->PeerTcpBytes() : std::nullopt;
}

// Counts `n` bytes just read from the kernel socket, which began at u.consumed (in_mu held): if
// they reach the peer's wake byte -- always the last byte on TCP -- it is counted, not returned.
// Returns the bytes that are the caller's.
ssize_t Account(LateUpgrade& u, ssize_t n, bool peek, const std::optional<uint64_t>& end) {
  const uint64_t first = u.consumed;
  if (!peek) {
    u.consumed += static_cast<uint64_t>(n);
    CountUse(u, n);
  }
  if (end && first + static_cast<uint64_t>(n) > *end) {
    if (!peek) u.peer_wake_taken = true;
    n = static_cast<ssize_t>(*end - first);
  }
  return n;
}

// One nonblocking read from the kernel socket (in_mu held): at most up to and including the
// peer's wake byte, which is counted but not returned. Returns bytes for the caller, -1 with
// errno, 0 for the kernel's EOF (*eof set) or when only the wake byte came.
ssize_t ReadKernel(SanSocket& s, LateUpgrade& u, const iovec* iov, int iovcnt, int flags,
                   bool* eof) {
  *eof = false;
  std::optional<uint64_t> end = PeerEnd(u, s);
  uint64_t limit = ~uint64_t{0};
  // Only the upper end sends a wake byte, so only the lower end receives one.
  const uint64_t wake_bytes = u.lower ? 1 : 0;
  if (end) {
    if (u.consumed > *end || (u.consumed == *end && (u.peer_wake_taken || !u.lower))) return 0;
    limit = *end - u.consumed + wake_bytes;  // its data, then the wake byte
  }
  const bool peek = flags & MSG_PEEK;
  char wake;
  iovec wake_only{&wake, 1};
  // The caller's iovec as it is until the peer's count is known (every read of a connection that
  // is not moving: no copy, no allocation); cut to the count once it is.
  std::vector<iovec> limited;
  const iovec* v = iov;
  size_t count = static_cast<size_t>(iovcnt);
  if (end && u.consumed == *end) {
    v = &wake_only;  // only the wake byte is left
    count = 1;
  } else if (end) {
    limited = Limited(iov, iovcnt, limit);
    v = limited.data();
    count = limited.size();
  }
  ssize_t n = kernel::recvv(s.fd, v, count, (flags & ~MSG_WAITALL) | MSG_DONTWAIT);
  if (n == 0) *eof = true;
  if (n <= 0) return n;
  if (!end) end = PeerEnd(u, s);  // the wake byte may be what woke us
  return Account(u, n, peek, end);
}

// Whether the peer's TCP part is all read (in_mu held): up to its count, and the wake byte at
// the lower end.
bool TcpPartRead(const LateUpgrade& u, const std::optional<uint64_t>& end) {
  return end && u.consumed >= *end && (!u.lower || u.peer_wake_taken);
}

}  // namespace

fabric::Provider* LateProviderFor(const sockaddr_storage& peer) {
  std::string why;
  return Runtime::Get().ShmProviderFor(reinterpret_cast<const sockaddr*>(&peer), sizeof peer, &why);
}

const std::string& FallbackReason(const SanSocket& s) {
  if (s.late && s.late->phase.load(std::memory_order_acquire) == LatePhase::kFailed) {
    return s.late->failure;
  }
  return s.fallback_reason;
}

void ConsiderLateUpgrade(SanSocket& s, bool active, const sockaddr_storage& peer,
                         fabric::Provider* provider) {
  Runtime& rt = Runtime::Get();
  if (!provider) return;
  s.late = std::make_unique<LateUpgrade>(active, peer,
                                         NowNs() + uint64_t{rt.config().upgrade_delay_us} * 1000);
  s.late->provider = provider;
  s.late_pending.store(true, std::memory_order_release);
  rt.connections().ScheduleLate(s.fd, s.id, s.late->next_ns);
}

void EndLateUpgrade(SanSocket& s, bool try_switch, const char* why) {
  LateUpgrade& u = *s.late;
  const uint64_t deadline = NowNs() + kPeerSwitchedWaitNs;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(u.mu);
      if (try_switch) {
        // A peer that came is taken first: the upper end switches as soon as it holds its half.
        if (u.phase.load() == LatePhase::kListening) TakeLastComer(u);
        if (u.phase.load() == LatePhase::kReady) TrySwitch(s, u);
      }
      const LatePhase phase = u.phase.load();
      if (phase == LatePhase::kSwitched || phase == LatePhase::kFailed) return;
      // Giving up aborts the channel, which is harmless until the upper end switched. The upper
      // end switches as soon as it holds its half, so once the lower end holds its own the
      // upper's WAKEUP is usually on its way, and the lower end must follow or the peer's
      // connection is reset: it waits for it (bounded; an upper end that cannot switch meanwhile
      // -- its send queue stays full -- learns of the abort at its next try and stays TCP).
      const bool peer_may_switch = try_switch && phase == LatePhase::kReady && u.lower;
      if (!peer_may_switch || NowNs() >= deadline) return FailLocked(s, u, why);
    }
    sched_yield();
  }
}

bool DriveLateSide(SanSocket& s) {
  LateUpgrade& u = *s.late;
  std::unique_lock<std::mutex> lock(u.mu, std::try_to_lock);
  if (!lock.owns_lock()) return true;  // a call of the application is taking a step
  if (!u.roles_known) return false;
  // The lower end: the half the peer made; the upper end: the peer's answer.
  const LatePhase taking = u.lower ? LatePhase::kListening : LatePhase::kAnswering;
  if (u.phase.load() == taking) Advance(s, u);
  if (u.phase.load() == LatePhase::kAnswering) return true;  // not answered yet
  if (u.phase.load() != LatePhase::kReady) return false;
  TrySwitch(s, u);
  return u.phase.load() == LatePhase::kReady;
}

uint64_t LateTurnWaitNs() {
  return std::max<uint64_t>(uint64_t{Runtime::Get().config().upgrade_delay_us} * 1000, kMs);
}

void OpenLateSide(SanSocket& s) {
  LateUpgrade& u = *s.late;
  std::unique_lock<std::mutex> lock(u.mu, std::try_to_lock);
  if (!lock.owns_lock() || u.phase.load() != LatePhase::kWaiting) return;
  // Only the lower end's step happens here: the upper end's connect waits for the peer.
  if (LearnRoles(s, u).ok() && u.lower) Advance(s, u);
}

bool FinishLateUpgrade(SanSocket& s) {
  // Only a move whose channel exists (the peer took part) is finished; one that is still
  // looking for its peer is given up, and the peer (asked the same) gives up too.
  if (LateStep(s)) return true;
  const uint64_t deadline = NowNs() + 5000 * kMs;
  while (LatePending(s) && Underway(s.late->phase.load()) && NowNs() < deadline) {
    if (LateStep(s)) return true;
    kernel::poll(nullptr, 0, 1);  // the peer takes its steps meanwhile
  }
  return s.mode.load(std::memory_order_acquire) == SocketMode::kShm;
}

bool LateStep(SanSocket& s) {
  LateUpgrade& u = *s.late;
  const LatePhase phase = u.phase.load();
  if (phase == LatePhase::kSwitched || phase == LatePhase::kFailed) {
    return s.mode.load(std::memory_order_acquire) == SocketMode::kShm;
  }
  if (phase < LatePhase::kReady) {
    const uint64_t now = NowNs();
    if (now < u.next_ns && !ProvedByUse(u)) return false;
    if (u.forked.load(std::memory_order_relaxed) && now < u.hold_check_ns.load()) return false;
  }
  std::unique_lock<std::mutex> lock(u.mu, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  Advance(s, u);
  if (u.phase.load() == LatePhase::kReady) TrySwitch(s, u);
  return s.mode.load(std::memory_order_acquire) == SocketMode::kShm;
}

namespace {

// Counts a kernel data call in; false if the socket switched (the call goes to the stream).
bool EnterKernel(SanSocket& s) {
  LateUpgrade& u = *s.late;
  for (;;) {
    uint32_t v = u.io.load();
    if (v & LateUpgrade::kSwitching) {
      sched_yield();  // a switch takes microseconds
      continue;
    }
    if (s.mode.load(std::memory_order_acquire) == SocketMode::kShm) return false;
    if (u.io.compare_exchange_weak(v, v + 1)) {
      if (s.mode.load(std::memory_order_acquire) != SocketMode::kShm) return true;
      u.io.fetch_sub(1);
      return false;
    }
  }
}

ssize_t Switched() {
  errno = kLateSwitched;
  return -1;
}

}  // namespace

namespace {

// A kernel send of a candidate, counted in `io` so no switch straddles it.
template <typename Call>
ssize_t CountedKernelCall(SanSocket& s, Call call) {
  if (!EnterKernel(s)) return Switched();
  const ssize_t n = call();
  const int err = errno;
  CountUse(*s.late, n);
  s.late->io.fetch_sub(1);
  errno = err;
  return n;
}

// How long a blocking part waits, at most, for the send queue to drain enough for the switch.
constexpr int kDrainForSwitchMs = 200;

// A blocking bulk send or sendfile in parts (late_upgrade.h): `send_part(limit)` hands the kernel
// at most `limit` bytes of what is left (the count it returns, -1 with errno), `advance(n)` takes
// n bytes off and says whether nothing is left. Between parts, a set-up step: once the socket
// switched, the caller sends the rest over the stream; once the upgrade failed, the rest goes in
// one kernel call, as without us.
template <typename SendPart, typename TakeOff>
ssize_t SendInParts(SanSocket& s, SendPart send_part, TakeOff advance) {
  size_t total = 0;
  for (;;) {
    const uint64_t limit = LatePending(s) ? PartLimit(*s.late) : ~uint64_t{0};
    const ssize_t n = CountedKernelCall(s, [&] { return send_part(limit); });
    // After a part went out, an error shows at the next call (as the kernel's would), and a
    // switch means the caller sends the rest over the stream.
    if (n < 0) return total > 0 ? static_cast<ssize_t>(total) : n;
    total += static_cast<size_t>(n);
    if (advance(static_cast<size_t>(n)) || static_cast<uint64_t>(n) < limit) {
      return static_cast<ssize_t>(
          total);  // all of it, or the kernel took less (a signal, a timeout)
    }
    if (LateStep(s)) return static_cast<ssize_t>(total);  // switched: the rest goes over shm
    // The channel is made; the upper end's switch waits for room in the send queue for its wake
    // byte (TrySwitch: at most half the send buffer queued), and a blocking part leaves the
    // queue full. Let it drain, bounded: this call would block on the full queue anyway, and
    // POLLOUT (a third of the buffer free) is not enough -- behind a slow reader the next part
    // refilled the queue every time and the move never happened (1 run in 2 under ASan).
    for (int waited = 0; waited < kDrainForSwitchMs && s.late->phase.load() == LatePhase::kReady;
         ++waited) {
      kernel::poll(nullptr, 0, 1);
      if (LateStep(s)) return static_cast<ssize_t>(total);
    }
  }
}

bool Blocking(const SanSocket& s, int flags) {
  return !(flags & MSG_DONTWAIT) && !s.nonblocking.load(std::memory_order_relaxed);
}

}  // namespace

ssize_t LateKernelSend(SanSocket& s, const iovec* iov, int iovcnt, int flags) {
  size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  if (!Blocking(s, flags) || want <= PartLimit(*s.late)) {
    return CountedKernelCall(
        s, [&] { return kernel::sendv(s.fd, iov, static_cast<size_t>(iovcnt), flags); });
  }
  IovRemainder rest(iov, iovcnt);
  return SendInParts(
      s,
      [&](uint64_t limit) {
        std::vector<iovec> part = Limited(rest.data(), rest.count(), limit);
        return kernel::sendv(s.fd, part.data(), part.size(), flags);
      },
      [&](size_t n) { return rest.Advance(n); });
}

ssize_t LateKernelSendFile(SanSocket& s, int in_fd, off_t* offset, size_t count) {
  if (!Blocking(s, 0) || count <= PartLimit(*s.late)) {
    return CountedKernelCall(s, [&] { return kernel::sendfile(s.fd, in_fd, offset, count); });
  }
  size_t left = count;
  return SendInParts(
      s,
      [&](uint64_t limit) {
        return kernel::sendfile(s.fd, in_fd, offset, std::min<uint64_t>(left, limit));
      },
      [&](size_t n) { return (left -= n) == 0; });
}

namespace {

// The read that returned data also took the peer's wake byte: switch now, not at the next call.
// Nothing more comes on TCP, and the peer's next bytes wait for our WAKEUP: a program that goes
// back to sleep in the kernel (epoll) on this socket would wait for nothing.
void SwitchIfPeerDid(SanSocket& s) {
  bool taken;
  {
    std::lock_guard<std::mutex> reading(s.late->in_mu);
    taken = s.late->peer_wake_taken;
  }
  if (taken && s.mode.load(std::memory_order_acquire) != SocketMode::kShm) LateStep(s);
}

// Whether the peer may switch, and its wake byte arrive, before this end has switched: only at
// the lower end, once its rendezvous is open (the upper end switches first).
bool PeerMaySwitchFirst(const LateUpgrade& u) {
  const LatePhase phase = u.phase.load();
  return (phase == LatePhase::kListening || phase == LatePhase::kReady) && u.lower;
}

// A blocking read while the peer cannot switch before us: the kernel's own, as cheap as on any
// TCP socket (in_mu held across it: a switch waits for it, another reader queues behind it).
// The bytes are counted, and a wake byte that came all the same (another thread of ours opened
// the rendezvous meanwhile) is dropped as in ReadKernel. nullopt: not possible now.
std::optional<ssize_t> BlockingRead(SanSocket& s, LateUpgrade& u, const iovec* iov, int iovcnt,
                                    int flags) {
  if ((flags & (MSG_WAITALL | MSG_DONTWAIT)) || PeerMaySwitchFirst(u)) return std::nullopt;
  std::lock_guard<std::mutex> reading(u.in_mu);
  if (s.mode.load(std::memory_order_acquire) == SocketMode::kShm) return Switched();
  const ssize_t got = kernel::recvv(s.fd, iov, static_cast<size_t>(iovcnt), flags);
  if (got <= 0) return got;
  const ssize_t n = Account(u, got, flags & MSG_PEEK, PeerEnd(u, s));
  if (n == 0) return std::nullopt;  // only the wake byte: go on as the peer switched
  return n;
}

}  // namespace

ssize_t LateKernelRecv(SanSocket& s, const iovec* iov, int iovcnt, int flags) {
  LateUpgrade& u = *s.late;
  const bool nonblocking = (flags & MSG_DONTWAIT) || s.nonblocking.load(std::memory_order_relaxed);
  if (!nonblocking) {
    if (std::optional<ssize_t> n = BlockingRead(s, u, iov, iovcnt, flags)) {
      SwitchIfPeerDid(s);
      return *n;
    }
  }
  const bool waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK) && !nonblocking;
  IovRemainder rest(iov, iovcnt);
  size_t total = 0;
  CallDeadline deadline;
  // Never asleep inside the kernel's recv: the peer's switch must find us (the wake byte makes
  // the socket readable, and then the stream carries what follows).
  for (;;) {
    ssize_t n;
    bool eof = false;
    {
      std::lock_guard<std::mutex> reading(u.in_mu);
      if (s.mode.load(std::memory_order_acquire) == SocketMode::kShm) {
        if (total > 0) return static_cast<ssize_t>(total);
        return Switched();
      }
      n = ReadKernel(s, u, rest.data(), rest.count(), flags, &eof);
    }
    const int err = errno;
    if (n > 0) {
      total += static_cast<size_t>(n);
      if (rest.Advance(static_cast<size_t>(n)) || !waitall) {
        SwitchIfPeerDid(s);
        return static_cast<ssize_t>(total);
      }
      continue;
    }
    if (eof || (n < 0 && err != EAGAIN && err != EWOULDBLOCK)) {
      if (total > 0) return static_cast<ssize_t>(total);
      errno = err;
      return n < 0 ? -1 : 0;
    }
    // Nothing, or only the peer's wake byte: our own switch is next, then the stream.
    if (LateStep(s)) {
      if (total > 0) return static_cast<ssize_t>(total);
      // Woken by the wake byte alone: the peer switched and may hold bytes back only until our
      // WAKEUP opened its window. Waiting a little for them spares a program that took the
      // wake-up for data a false alarm (wrk reads once per readiness; EAGAIN is an error there).
      AwaitFirstBytes(s);
      return Switched();
    }
    if (nonblocking) {
      if (total > 0) return static_cast<ssize_t>(total);
      errno = EAGAIN;
      return -1;
    }
    const uint64_t now = NowNs();
    if (deadline.first_wait_ns == 0) {
      deadline.first_wait_ns = now;
      deadline.deadline_ns = TimeoutDeadline(s, false, now);
    }
    if (now >= deadline.deadline_ns) {
      if (total > 0) return static_cast<ssize_t>(total);
      errno = EAGAIN;
      return -1;
    }
    int nap = LatePending(s) ? kLateNapMs : -1;
    if (deadline.deadline_ns != kNoDeadline) {
      const int left = static_cast<int>((deadline.deadline_ns - now + 999999) / 1000000);
      nap = nap < 0 ? left : std::min(nap, left);
    }
    pollfd p{s.fd, POLLIN, 0};
    if (kernel::poll(&p, 1, nap) < 0 && errno == EINTR) {
      if (total > 0) return static_cast<ssize_t>(total);
      errno = EINTR;
      return -1;
    }
  }
}

bool InflowPending(SanSocket& s) {
  return s.late && !s.late->inflow_done.load(std::memory_order_acquire) &&
         s.late->phase.load() == LatePhase::kSwitched;
}

ssize_t InflowRecv(SanSocket& s, const iovec* iov, int iovcnt, bool peek) {
  LateUpgrade& u = *s.late;
  bool only_the_wake_byte = false;
  {
    std::lock_guard<std::mutex> reading(u.in_mu);
    if (u.inflow_done.load()) return Switched();
    bool eof = false;
    const bool wake_before = u.peer_wake_taken;
    const ssize_t n = ReadKernel(s, u, iov, iovcnt, peek ? MSG_PEEK : 0, &eof);
    const int err = errno;
    std::optional<uint64_t> end = s.stream->PeerTcpBytes();
    if (TcpPartRead(u, end)) u.inflow_done.store(true, std::memory_order_release);
    if (n > 0) return n;
    // The peer closed its kernel socket without moving (it gave up, or died): everything it
    // sent came that way, and this is its end, as the kernel socket says (here and later).
    if (eof) return 0;
    if (n < 0 && !(end && u.consumed >= *end)) {
      errno = err;
      return -1;
    }
    only_the_wake_byte = !wake_before && u.peer_wake_taken;
  }
  // The stream's turn. A read that found only the wake byte was woken by it: the program took
  // the wake-up for data, and the peer's next bytes wait only for our WAKEUP (sent just now).
  if (only_the_wake_byte && !peek) AwaitFirstBytes(s);
  return Switched();
}

size_t LateReadable(SanSocket& s) {
  LateUpgrade& u = *s.late;
  std::lock_guard<std::mutex> reading(u.in_mu);
  int queued = 0;
  if (kernel::ioctl(s.fd, FIONREAD, &queued) != 0 || queued < 0) queued = 0;
  const bool shm = s.mode.load(std::memory_order_acquire) == SocketMode::kShm;
  if (shm && u.inflow_done.load()) return s.stream->Available();
  std::optional<uint64_t> end = PeerEnd(u, s);
  if (!end) return static_cast<size_t>(queued);
  const uint64_t tcp_left = *end > u.consumed ? *end - u.consumed : 0;
  if (tcp_left > 0) return static_cast<size_t>(std::min<uint64_t>(tcp_left, queued));
  return shm ? s.stream->Available() : 0;
}

short InflowRevents(SanSocket& s) {
  if (!InflowPending(s)) return 0;
  LateUpgrade& u = *s.late;
  {
    std::lock_guard<std::mutex> reading(u.in_mu);
    std::optional<uint64_t> end = s.stream->PeerTcpBytes();
    if (end && u.consumed >= *end) {
      // Only the wake byte can be left: take it now rather than report it as data (ReadKernel
      // reads nothing else past the peer's count).
      char unused;
      const iovec one{&unused, 1};
      bool eof = false;
      ReadKernel(s, u, &one, 1, 0, &eof);
      if (TcpPartRead(u, end)) u.inflow_done.store(true, std::memory_order_release);
      return 0;  // the stream's readiness tells the rest
    }
  }
  pollfd p{s.fd, POLLIN, 0};
  return kernel::poll(&p, 1, 0) > 0 ? static_cast<short>(p.revents & (POLLIN | POLLRDHUP)) : 0;
}

bool SettleReadable(SanSocket& s) {
  if (!SanlibCarries(s)) return false;
  return s.mode.load(std::memory_order_acquire) == SocketMode::kShm || LateStep(s);
}

}  // namespace san
