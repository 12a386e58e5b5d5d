#include "sanlib/socket/late_upgrade.h"

#include <linux/sockios.h>
#include <sched.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cstring>

#include "sanlib/common/clock.h"
#include "sanlib/common/fnv1a.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/peer_uid.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/fabric/address.h"
#include "sanlib/socket/fd_budget.h"
#include "sanlib/socket/late_counts.h"
#include "sanlib/socket/late_fork.h"
#include "sanlib/socket/late_holders.h"
#include "sanlib/socket/late_steps.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

namespace san {

LateUpgrade::~LateUpgrade() {
  SetLatePhase(phase, LatePhase::kFailed);
  if (holders_record != late_holders::kNoRecord) late_holders::Leave(*this, ThisPid());
}

namespace {

constexpr uint64_t kMs = 1000000;
// How many tries of a move each end makes (late_upgrade.h step 1): one at its first spell of use,
// and more at later ones, for a peer that stopped calling while we tried. Bounded, as a peer that
// is not sanlib never takes part: each try holds a listener slot or makes a few dials.
constexpr uint32_t kMaxTries = 4;
// Within a try the upper end dials 0.1, 0.2, 0.4 ... ms apart, then every 1.6 s, and at once
// when its peer comes to life after the dials slowed (PeerCameToLife). The first dials come soon:
// the lower end opens its side within a delay of use too, and a connection proved by its bytes is
// in the middle of a bulk transfer, which may be over in a few milliseconds.
constexpr uint64_t kRetryBaseNs = kMs / 10;
constexpr uint32_t kDoublings = 14;
// How long the upper end waits for the lower end's connection thread to answer its connect;
// past it the connection stays TCP. It looks at each of its data calls without waiting in one,
// except in a bulk transfer's (LateStep).
constexpr int kConnectWaitMs = 200;
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

// The socket is kShm on the candidate's stream from now on (mu held): kShm first, then no longer
// pending (SanlibCarries).
void SwitchedLocked(SanSocket& s, LateUpgrade& u) {
  SetLatePhase(u.phase, LatePhase::kSwitched);
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

// What sanstat says of a candidate whose last try met no peer (LateUpgrade::missed): texts that
// are never destroyed (sanstat may ask while the process exits). Each fits san_info::fallback.
const std::string& MissedText(bool lower) {
  static const std::string* const came = new std::string(
      "not moved to shm yet (late set-up): the peer never came; tries again when in use");
  static const std::string* const listened = new std::string(
      "not moved to shm yet (late set-up): the peer never listened; tries again when in use");
  return lower ? *came : *listened;
}

// How long a try lasts (late_upgrade.h step 1).
uint64_t TryNs() { return uint64_t{Runtime::Get().config().upgrade_try_ms} * kMs; }

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
  SetLatePhase(u.phase, LatePhase::kFailed);
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
  SetLatePhase(u.phase, LatePhase::kReady);
  return true;
}

// Whether the connection has carried SAN_UPGRADE_BYTES over TCP: a bulk transfer is under way.
bool ProvedByBytes(const LateUpgrade& u) {
  const uint64_t bytes = Runtime::Get().config().upgrade_bytes;
  return bytes != 0 && u.carried.load(std::memory_order_relaxed) >= bytes;
}

// Whether the connection has proved itself by use -- carried SAN_UPGRADE_BYTES over TCP, or
// SAN_UPGRADE_CALLS data calls that moved bytes -- so the delay no longer applies.
bool ProvedByUse(const LateUpgrade& u) {
  const uint32_t calls = Runtime::Get().config().upgrade_calls;
  return ProvedByBytes(u) || (calls != 0 && u.calls.load(std::memory_order_relaxed) >= calls);
}

// Whether the upper end's dials had slowed past the delay and the connection has carried bytes
// since the last one: the peer's program came to life. sockperf's client sleeps 2 s after its
// warm-up while its server spins on the socket: the server's end, in use, dialled a lower end
// not open yet until its dials were 1.6 s apart, and the client's end, opening once in use, was
// found only after the 1 s run (1 run in 10 with SAN_SPIN_US=10 s). Once per try: a peer that is
// not sanlib never opens.
bool PeerCameToLife(const LateUpgrade& u) {
  const uint64_t at = u.carried_at_slow_dial.load(std::memory_order_relaxed);
  return at != LateUpgrade::kNoWatch && u.carried.load(std::memory_order_relaxed) != at;
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
std::string NeverTookPart(const LateUpgrade& u, const std::string& what) {
  Result<uid_t> uid = LookupPeerUidHere(OwnAddress(u), u.peer);
  if (uid.ok() && *uid != geteuid()) {
    return std::string("the peer (uid ") + std::to_string(*uid) + ") " + what +
           ": its SAN_PEER_USERS may refuse our user";
  }
  return std::string("the peer ") + what + " (not a sanlib process?)";
}

// A try that met no peer ended (mu held; nothing of it is left: the upper end holds no stream,
// the lower end's listener is closed). The end waits for its application's next spell of use,
// or for the connection to prove itself again by bytes or calls, and tries anew; after
// kMaxTries it stays TCP, saying why.
void MissedLocked(SanSocket& s, LateUpgrade& u, const char* what, uint64_t now) {
  if (++u.tries >= kMaxTries) {
    return FailLocked(
        s, u, NeverTookPart(u, std::string(what) + " in " + std::to_string(kMaxTries) + " tries"));
  }
  SAN_LOG_INFO("fd %d: the peer %s (try %u of %u): tries again when the connection is in use",
               s.fd.load(), what, u.tries, kMaxTries);
  u.attempts = 0;
  u.woke_this_try = false;
  u.carried_at_slow_dial.store(LateUpgrade::kNoWatch, std::memory_order_relaxed);
  u.carried.store(0, std::memory_order_relaxed);  // proved again only by what comes next
  u.calls.store(0, std::memory_order_relaxed);
  u.use_since_ns.store(now, std::memory_order_relaxed);  // a spell counts from here
  u.next_ns = now + late::DelayNs();
  u.missed.store(&MissedText(u.lower), std::memory_order_release);
  SetLatePhase(u.phase, LatePhase::kWaiting);
}

// Whether the upper end may dial by time (mu held; late_upgrade.h step 1, docs/sockets.md "The
// upper end's dial"): its application has been calling on the connection for the delay, never
// pausing as long. If not, the next look is set for when it could be. (One proved by its bytes or
// calls does not ask.)
bool InUseForTheDelay(LateUpgrade& u, uint64_t now) {
  const uint64_t delay = late::DelayNs();
  const uint64_t since = u.use_since_ns.load(std::memory_order_relaxed);
  if (now - u.last_use_ns.load(std::memory_order_relaxed) >= delay) {
    u.next_ns = now + delay;  // idle: its next call starts a spell (NoteCall)
    return false;
  }
  if (now - since < delay) {
    u.next_ns = since + delay;
    return false;
  }
  return true;
}

// How long a lower end that found the fd budget full of sides open (fd_budget.h RoomForLateSide)
// waits before it looks for its turn again.
uint64_t LateTurnWaitNs() {
  return std::max<uint64_t>(uint64_t{Runtime::Get().config().upgrade_delay_us} * 1000, kMs);
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
// kConnecting): a refusal (the side is not open yet, or full) is tried again with backoff until
// the try's time is up; anything else leaves the connection TCP.
void RetryOrFailLocked(SanSocket& s, LateUpgrade& u, const Status& why, uint64_t now) {
  ++u.attempts;
  if (why.code() != ECONNREFUSED) {
    FailLocked(s, u, why.ToString());
  } else if (now >= u.give_up_ns) {
    MissedLocked(s, u, "never opened its side", now);
  } else {
    const uint64_t wait = kRetryBaseNs << std::min(u.attempts - 1, kDoublings);
    u.next_ns = now + wait;
    // Slowed past the delay: watch for the peer's program coming to life (PeerCameToLife).
    u.carried_at_slow_dial.store(
        wait > late::DelayNs() && !u.woke_this_try ? u.carried.load() : LateUpgrade::kNoWatch,
        std::memory_order_relaxed);
  }
}

// The upper end takes the lower end's answer to its request (mu held, phase kAnswering), waiting
// at most `wait_ms` for it: kReady once it came, kAnswering while it has not, and a refusal
// tried again like one at the dial.
void TakeAnswerLocked(SanSocket& s, LateUpgrade& u, int wait_ms, uint64_t now) {
  Status st = u.stream->endpoint().FinishConnect(wait_ms);
  if (st.ok()) {
    SetLatePhase(u.phase, LatePhase::kReady);
  } else if (st.code() != EINPROGRESS) {
    u.stream.reset();
    SetLatePhase(u.phase, LatePhase::kConnecting);
    RetryOrFailLocked(s, u, st, now);
  }
}

}  // namespace

namespace late {

uint64_t DelayNs() { return uint64_t{Runtime::Get().config().upgrade_delay_us} * 1000; }

void Advance(SanSocket& s, LateUpgrade& u) {
  Runtime& rt = Runtime::Get();
  const uint64_t now = NowNs();
  switch (u.phase.load()) {
    case LatePhase::kWaiting: {
      if (now < u.next_ns && !ProvedByUse(u)) return;
      if (!SoleHolder(s, now)) return;  // another process holds it too (fork): not yet
      if (Status st = LearnRoles(s, u); !st.ok()) return FailLocked(s, u, st.ToString());
      if (!ProvedByUse(u) && !InUseForTheDelay(u, now)) return;
      // Room in the fd budget: for the channel, and at the lower end for its side until then.
      std::string full;
      LateSideRoom room = LateSideRoom::kOpen;
      if (u.lower) {
        room = RoomForLateSide(rt.connections().late_listener_count(), &full);
      } else if (!ChannelFitsFdBudget(&full)) {
        room = LateSideRoom::kFull;
      }
      if (room == LateSideRoom::kFull) return FailLocked(s, u, full);
      if (room == LateSideRoom::kWait) {
        // The sides open fill the fd budget with the channels they become: this one waits its
        // turn (the upper end's attempts meanwhile are refused at once and retried). Looked at
        // before the checks below, which a wait repeats. One look at a time is scheduled: a
        // connection proved by use takes this step at every data call, and each used to queue
        // another. Another once the last one's time has come (it ran, or it found a data call
        // taking this very step and did nothing).
        u.next_ns = now + LateTurnWaitNs();
        if (u.turn_look_ns <= now) {
          u.turn_look_ns = u.next_ns;
          rt.connections().ScheduleLate(s.fd, s.id, u.next_ns);
        }
        return;
      }
      if (std::string why; !PeerUserAllowed(u, &why)) return FailLocked(s, u, why);
      u.next_ns = now;  // due now, whether by time or by bytes
      if (!u.lower) {
        u.give_up_ns = now + TryNs();
        SetLatePhase(u.phase, LatePhase::kConnecting);
        return Advance(s, u);
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
      u.give_up_ns = now + TryNs();
      // kListening before the peer can come: a read that meets the peer's wake byte must find
      // the phase that makes it look for the peer's count (PeerEnd), or it takes the byte for data.
      SetLatePhase(u.phase, LatePhase::kListening);
      Status st =
          rt.connections().AddListener(u.token, addr, std::move(l).value(),
                                       u.provider->capabilities(), params, true, s.fd.load(), s.id);
      if (!st.ok()) {
        u.token = 0;
        return FailLocked(s, u, "connection thread: " + st.ToString());
      }
      // Closed at the try's end even if the application makes no call by then (LowerEndDue).
      rt.connections().ScheduleLate(s.fd.load(), s.id, u.give_up_ns);
      return;
    }
    case LatePhase::kConnecting: {
      if (now < u.next_ns) {
        if (!PeerCameToLife(u)) return;
        // Dial now, and again soon after, as at the try's start: its end opens within a delay.
        u.woke_this_try = true;
        u.attempts = 0;
      }
      const sockaddr_in6 where = RendezvousOf(u);
      // Dialled first: until the lower end opens its side (within a delay of use, or once it
      // had its turn: fd_budget.h RoomForLateSide) a refusal costs a socket and a connect, not
      // a segment built and torn down again.
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
      // The lower end's connection thread builds its half and answers; a data call does not
      // wait for it unless the connection is a bulk transfer (LateStep). Waiting in every call
      // cost a few ms per connection that moved: conn-bench hold's 10,000 idle connections,
      // echoing once each in order, took 0.4-1.9 s instead of TCP's 0.08 s.
      u.stream = std::move(r).value();
      u.carried_at_slow_dial.store(LateUpgrade::kNoWatch, std::memory_order_relaxed);
      SetLatePhase(u.phase, LatePhase::kAnswering);
      // An application that makes no further call soon (an idle connection) is switched by the
      // connection thread: the lower end, holding its half, waits for our WAKEUP at its close.
      rt.connections().ScheduleDrive(s.fd, s.id);
      [[fallthrough]];
    }
    case LatePhase::kAnswering:
      return TakeAnswerLocked(s, u, 0, now);
    case LatePhase::kListening: {
      if (std::unique_ptr<proto::Stream> got = rt.connections().Claim(u.token, u.tuple)) {
        rt.connections().RemoveListener(u.token);
        u.token = 0;
        u.stream = std::move(got);
        SetLatePhase(u.phase, LatePhase::kReady);
      } else if (now >= u.give_up_ns && !TakeLastComer(u)) {
        MissedLocked(s, u, "never came", now);
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace late

namespace {

// Switches both directions to the stream (mu held, phase kReady). Nothing happens unless no
// thread of ours is in a kernel call on the socket and the send queue has room for the wake byte.
void TrySwitch(SanSocket& s, LateUpgrade& u) {
  // The upper end goes first; the lower end follows its WAKEUP, so every wake byte reaches an
  // end that holds the stream which tells where it lies. An upper end that gave the move up
  // (closed before it took our answer, say) aborted the stream without a WAKEUP and sends no wake
  // byte: this end stays TCP at once, rather than wait for it (its reads nap, its close waited
  // 200 ms). FailLocked looks for a WAKEUP once more after its own abort.
  if (u.lower && !u.stream->PeerTcpBytes()) {
    if (u.stream->GetReadiness().error != 0) FailLocked(s, u, "the peer gave the move up");
    return;
  }
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
  // put the peer's wake byte in the wrong place. The move is given up then, and the kernel's
  // count is the one to go on with: if the peer switched all the same, this end reads its TCP
  // bytes up to the peer's count on the aborted stream (FailLocked), and must not take the wake
  // byte for one of them.
  if (st.ok() && consumed.value() != u.consumed) {
    u.consumed = consumed.value();
    st = Status(EPROTO, "unseen reads");
  }
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

}  // namespace

fabric::Provider* LateProviderFor(const sockaddr_storage& peer) {
  std::string why;
  return Runtime::Get().ShmProviderFor(reinterpret_cast<const sockaddr*>(&peer), sizeof peer, &why);
}

const std::string& FallbackReason(const SanSocket& s) {
  if (s.late_made.load(std::memory_order_acquire)) {
    const LateUpgrade& u = *s.late;
    if (u.phase.load(std::memory_order_acquire) == LatePhase::kFailed) return u.failure;
    if (const std::string* missed = u.missed.load(std::memory_order_acquire)) return *missed;
  }
  return s.fallback_reason;
}

void ConsiderLateUpgrade(SanSocket& s, bool active, const sockaddr_storage& peer,
                         fabric::Provider* provider) {
  if (!provider) return;
  const uint64_t now = NowNs();
  s.late = std::make_unique<LateUpgrade>(active, peer, now, now + late::DelayNs());
  s.late->provider = provider;
  s.late_made.store(true, std::memory_order_release);
  s.late_pending.store(true, std::memory_order_release);
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
        // An answer already there is taken (a look: an upper end that closes before the answer
        // came gives the move up, and the lower end stays TCP too).
        if (u.phase.load() == LatePhase::kAnswering) TakeAnswerLocked(s, u, 0, NowNs());
        if (u.phase.load() == LatePhase::kReady) TrySwitch(s, u);
      }
      const LatePhase phase = u.phase.load();
      if (phase == LatePhase::kSwitched || phase == LatePhase::kFailed) return;
      // Giving up aborts the channel, which is harmless until the upper end switched. The upper
      // end switches once it took the lower end's answer (at its next call, or from its
      // connection thread), so once the lower end holds its half the upper's WAKEUP may be on
      // its way, and the lower end must follow or the peer's connection is reset: it waits for
      // it (bounded, and no longer once the peer gave up: TrySwitch; an upper end that cannot
      // switch meanwhile -- its send queue stays full -- learns of the abort at its next try and
      // stays TCP).
      const bool peer_may_switch = try_switch && phase == LatePhase::kReady && u.lower;
      if (!peer_may_switch || NowNs() >= deadline) return FailLocked(s, u, why);
    }
    sched_yield();
  }
}

bool KeepLateOnTcp(SanSocket& s, const char* why) {
  LateUpgrade& u = *s.late;
  std::lock_guard<std::mutex> lock(u.mu);
  const LatePhase phase = u.phase.load();
  if (phase != LatePhase::kWaiting) return phase == LatePhase::kFailed;
  u.failure = std::string("move given up: ") + why;  // read once the phase says kFailed
  SetLatePhase(u.phase, LatePhase::kFailed);
  s.late_pending.store(false, std::memory_order_release);
  return true;
}

void CloseLateUpgrade(SanSocket& s) {
  LateUpgrade& u = *s.late;
  Runtime::Get().connections().ForgetLate(s.fd, s.id);
  {
    std::lock_guard<std::mutex> lock(u.mu);
    if (u.phase.load() == LatePhase::kWaiting) {
      SetLatePhase(u.phase, LatePhase::kFailed);
      s.late_pending.store(false, std::memory_order_release);
      return;
    }
  }
  EndLateUpgrade(s, true, "closed first");
}

bool DriveLateSide(SanSocket& s) {
  LateUpgrade& u = *s.late;
  std::unique_lock<std::mutex> lock(u.mu, std::try_to_lock);
  if (!lock.owns_lock()) return true;  // a call of the application is taking a step
  if (!u.roles_known) return false;
  // The lower end: the half the peer made; the upper end: the peer's answer.
  const LatePhase taking = u.lower ? LatePhase::kListening : LatePhase::kAnswering;
  if (u.phase.load() == taking) late::Advance(s, u);
  if (u.phase.load() == LatePhase::kAnswering) return true;  // not answered yet
  if (u.phase.load() != LatePhase::kReady) return false;
  TrySwitch(s, u);
  return u.phase.load() == LatePhase::kReady;
}

void LowerEndDue(SanSocket& s) {
  LateUpgrade& u = *s.late;
  const LatePhase phase = u.phase.load();
  if (phase != LatePhase::kWaiting && phase != LatePhase::kListening) return;
  std::unique_lock<std::mutex> lock(u.mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    // A data call is taking a step. A try's end is looked at again soon: that call may have come
    // just before it, and be the application's last for a long while.
    if (phase == LatePhase::kListening) {
      Runtime::Get().connections().ScheduleLate(s.fd.load(), s.id, NowNs() + kMs);
    }
    return;
  }
  // Only the lower end's steps happen here: the upper end dials from its own data calls.
  if (LearnRoles(s, u).ok() && u.lower) late::Advance(s, u);
}

bool FinishLateUpgrade(SanSocket& s) {
  // Only a move whose channel exists (the peer took part) is finished; one that is still
  // looking for its peer is given up, and the peer (asked the same) gives up too.
  if (LateStep(s)) return true;
  const uint64_t deadline = NowNs() + 5000 * kMs;
  while (LatePending(s) && late::Underway(s.late->phase.load()) && NowNs() < deadline) {
    if (LateStep(s)) return true;
    kernel::poll(nullptr, 0, 1);  // the peer takes its steps meanwhile
  }
  return s.mode.load(std::memory_order_acquire) == SocketMode::kShm;
}

namespace {

// A data call (or a look at readiness) on the candidate: one after the delay or more without any
// starts a spell of use (InUseForTheDelay).
void NoteCall(LateUpgrade& u, uint64_t now) {
  if (now - u.last_use_ns.load(std::memory_order_relaxed) >= late::DelayNs()) {
    u.use_since_ns.store(now, std::memory_order_relaxed);
  }
  u.last_use_ns.store(now, std::memory_order_relaxed);
}

}  // namespace

bool LateStep(SanSocket& s) {
  // Another candidate of ours may be due meanwhile, idle (this process's data calls are on other
  // connections): a thread to open its side, if none runs yet (connection_thread.h).
  Runtime::Get().connections().StartIfLateDue();
  LateUpgrade& u = *s.late;
  const LatePhase phase = u.phase.load();
  if (phase == LatePhase::kSwitched || phase == LatePhase::kFailed) {
    return s.mode.load(std::memory_order_acquire) == SocketMode::kShm;
  }
  if (phase < LatePhase::kReady) {
    const uint64_t now = NowNs();
    NoteCall(u, now);
    if (now < u.next_ns && !ProvedByUse(u) && !PeerCameToLife(u)) return false;
    if (u.forked.load(std::memory_order_relaxed) && now < u.hold_check_ns.load()) return false;
  }
  std::unique_lock<std::mutex> lock(u.mu, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  late::Advance(s, u);
  // A bulk transfer waits for the answer here, in the application's call, as a call that does
  // not wait would carry the transfer on over TCP, perhaps to its end (a 4 MiB curl download
  // from nginx is over in 5 ms on this VM, and the lower end's connection thread, starved of
  // CPU by the transfer itself, answered 3.6 ms after the request). Any other call only looks.
  if (u.phase.load() == LatePhase::kAnswering && ProvedByBytes(u)) {
    TakeAnswerLocked(s, u, kConnectWaitMs, NowNs());
  }
  if (u.phase.load() == LatePhase::kReady) TrySwitch(s, u);
  return s.mode.load(std::memory_order_acquire) == SocketMode::kShm;
}

}  // namespace san
