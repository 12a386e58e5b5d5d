// The data calls of a late upgrade candidate (late_upgrade.h; its set-up is late_upgrade.cc): its
// kernel sends and reads counted, so that no call straddles the switch; a blocking bulk send in
// parts; after the switch, the peer's TCP part read up to its count (the inflow) and the wake byte
// dropped, before the stream.
#include "sanlib/socket/late_upgrade.h"

#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "sanlib/common/clock.h"
#include "sanlib/common/kernel.h"
#include "sanlib/socket/drive.h"
#include "sanlib/socket/iov_remainder.h"
#include "sanlib/socket/late_steps.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

namespace san {
namespace {

constexpr uint64_t kMs = 1000000;
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
  if (u.phase.load() == LatePhase::kListening) late::Advance(s, u);
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
  // Nor at the upper end while its move is under way: asleep in the kernel, holding in_mu, it
  // could not be switched by its connection thread (DriveLateSide), and the lower end, holding
  // its half, would wait for its WAKEUP until its next call.
  if (late::Underway(u.phase.load()) && !u.lower) return std::nullopt;
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
      nap = SoonerMs(nap, left);
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

short InflowRevents(SanSocket& s, bool* tcp_due) {
  if (tcp_due) *tcp_due = false;
  if (!InflowPending(s)) return 0;
  LateUpgrade& u = *s.late;
  {
    std::lock_guard<std::mutex> reading(u.in_mu);
    std::optional<uint64_t> end = s.stream->PeerTcpBytes();
    if (tcp_due) *tcp_due = !end || u.consumed < *end;
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
