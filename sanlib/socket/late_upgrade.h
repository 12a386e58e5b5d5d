// Late upgrade: a connection that runs on kernel TCP moves to shm once it has lived a while, or
// carried enough bytes, or made enough data calls (a chatty request/response connection),
// whichever comes first.
//
// Why: a channel set up in connect() (the eager way, docs/sockets.md) costs a segment, doorbells
// and a rendezvous per connection -- several times a kernel TCP connection's cost, all lost on a
// short one -- and it depends on the listener's owner process. A late upgrade costs nothing until
// the connection has lived SAN_UPGRADE_DELAY_US, and it is arranged between the two processes
// that hold the connection's ends, whoever created the listener.
//
// How, for one connection between this host's processes A and B (both sanlib):
//  1. Each end becomes a candidate when it settles on kernel TCP (connect or accept) with a local
//     peer. Each end *tries* once its application has been using the connection for the delay,
//     its calls never a delay apart (a *spell of use*), or at once when the connection has proved
//     itself by SAN_UPGRADE_BYTES (a blocking bulk send is cut there, so the rest of a large
//     transfer can go over shm) or SAN_UPGRADE_CALLS. The lower end (by address and port) opens a
//     rendezvous private to the connection -- an shm listener whose name derives from the 4-tuple
//     (fabric/address.h PrivateRendezvousAddress) -- served by its connection thread; the upper
//     end connects to it (retrying with backoff while the lower end is not there yet) with the
//     4-tuple as its request: both now hold the two halves of a stream, and neither has sent its
//     WAKEUP. A connection in use is in use at both ends (a request is read, a reply written;
//     a stream is read), so their spells start within a round trip of each other and their tries
//     meet. An idle connection makes no try and costs nothing (no listener slot, no timer): one
//     idle past the delay and then used for a moment (one request of a pool's idle connection)
//     stays TCP, and 10,000 of them used at once do not all try to move.
//     A try lasts SAN_UPGRADE_TRY_MS at each end (the lower end's rendezvous open, closed at the
//     end by its connection thread; the upper end dialling). One that met no peer -- the peer
//     stopped calling, or is not sanlib -- is not the end: that end waits again, and tries anew
//     at its next spell of use (or once the connection proved itself again by bytes or calls),
//     kMaxTries in all; then the connection stays TCP for good.
//  2. Each end then *switches*, both directions at once, at a moment when none of its threads is
//     inside a kernel call on the socket: it reads from the kernel how many bytes it has written
//     to the TCP socket (TCP_INFO bytes acked + SIOCOUTQ) and how many it has consumed (bytes
//     received - SIOCINQ), sends its WAKEUP carrying the written count (proto/wire.h), and from
//     then on the socket is kShm: what it sends goes over the stream. The upper end switches as
//     soon as it holds its half, and also writes one *wake byte* on the TCP socket; the lower end
//     switches only after the upper end's WAKEUP arrived, and writes none (the upper end has
//     switched already and reads its stream).
//  3. After its switch an end still reads the peer's TCP bytes first (the *inflow*): up to the
//     count in the peer's WAKEUP, then (at the lower end) the upper end's wake byte, which it
//     drops; only then the stream. The wake byte wakes whatever the lower end's application
//     sleeps in (a blocking recv, poll, epoll, select) when the upper end switched: everything
//     after it comes through shared memory.
// Any failure before a switch leaves the connection plain TCP with the reason in sanstat; an end
// never switches while another process holds the socket (fork) or after it shut down writing.
//
// Where: the set-up's steps and the switch in late_upgrade.cc; a candidate's data calls (the
// functions from AwaitPeerWindow on, and LateKernelSend ... SettleReadable) in late_io.cc; the
// kernel's byte counts in late_counts.h; fork in late_fork.h; the phases, and whether any move of
// the process is under way (what lets epoll believe the kernel meanwhile), in late_phase.h.
//
// Thread-safety: the steps run under LateUpgrade::mu, taken with try_lock on the data path (a
// step another thread is running is not waited for). `io` counts this process's kernel data calls
// in progress on the socket; the switch claims it at zero, so no call straddles the switch.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/late_phase.h"

namespace san {

struct SanSocket;

struct LateUpgrade {
  LateUpgrade(bool active_open, const sockaddr_storage& peer_address, uint64_t now_ns,
              uint64_t due_ns)
      : last_use_ns(now_ns),
        use_since_ns(now_ns),
        active(active_open),
        peer(peer_address),
        next_ns(due_ns) {}
  // A moving one stops counting; a forked one's holder lets go (late_holders.h).
  ~LateUpgrade();

  // Changed only through SetLatePhase (late_phase.h), which counts the moving candidates.
  std::atomic<LatePhase> phase{LatePhase::kWaiting};
  // Bytes carried over kernel TCP both ways, and the data calls that carried them (counted by
  // the data calls, relaxed): at SAN_UPGRADE_BYTES or SAN_UPGRADE_CALLS the connection has proved
  // itself, and the delay no longer applies.
  std::atomic<uint64_t> carried{0};
  std::atomic<uint32_t> calls{0};
  // When this end's application last called on it (a data call, or a look at its readiness; the
  // connection's set-up counts as one) and when its present spell of use began (its first call
  // after SAN_UPGRADE_DELAY_US or more without one): the upper end dials by time only once a spell
  // has lasted the delay (step 1 above). Written by LateStep, relaxed.
  std::atomic<uint64_t> last_use_ns;
  std::atomic<uint64_t> use_since_ns;
  std::mutex mu;
  static constexpr uint32_t kSwitching = 1u << 31;
  std::atomic<uint32_t> io{0};  // kernel data calls in progress | kSwitching
  // A lower end waiting its turn (fd_budget.h RoomForLateSide): when the look its
  // connection thread takes next is due (mu; 0: none scheduled).
  uint64_t turn_look_ns = 0;
  // Came through a fork (late_fork.h): moves only once no other process holds it, looked at
  // no earlier than hold_check_ns. Who holds it: its record among the fork relatives'
  // (late_holders.h; kNoRecord, or kUnknown), and the entry the last fork reserved for its child
  // (mu, or the fork handlers).
  std::atomic<bool> forked{false};
  std::atomic<uint64_t> hold_check_ns{0};
  int holders_record = -1;
  int holders_entry = -1;

  const bool active;            // this end called connect() (its TCP_INFO counts the SYN as acked)
  const sockaddr_storage peer;  // canonical
  // Set by the first step (a connection that never gets there costs no getsockname):
  bool roles_known = false;
  bool lower = false;      // this end listens on the private rendezvous
  proto::FourTuple tuple;  // client = the upper end, server = the lower end
  // The next step's time: written under mu, read without it by LateStep's first look (a data
  // call that is not due takes no lock) while the connection thread may be taking a step.
  std::atomic<uint64_t> next_ns;
  uint64_t give_up_ns = 0;  // the end of this try (the lower end's listen, the upper end's dials)
  uint32_t attempts = 0;    // the upper end's dials in this try
  // Once its dials have slowed past the delay, the carried count at the upper end's last dial:
  // bytes since mean the peer's program came to life, and its end opens within a delay of use
  // (the next dial is not left to the backoff: PeerCameToLife). kNoWatch otherwise. Written under
  // mu, read by LateStep's first look.
  static constexpr uint64_t kNoWatch = ~uint64_t{0};
  std::atomic<uint64_t> carried_at_slow_dial{kNoWatch};
  bool woke_this_try = false;  // the peer came to life once in this try (mu)
  uint32_t tries = 0;          // tries that met no peer
  // Set once a try met no peer, while the next is awaited: why the connection is on TCP (one of
  // two texts that live as long as the library; read without mu by FallbackReason).
  std::atomic<const std::string*> missed{nullptr};
  int token = 0;  // the private listener at the connection thread
  std::unique_ptr<proto::Stream> stream;
  fabric::Provider* provider = nullptr;
  // Why the move was given up: written once, before phase becomes kFailed (then read by anyone
  // who sees kFailed).
  std::string failure;

  // Reading the kernel socket (under in_mu, before and after the switch; never across a sleep):
  // the bytes consumed since the connection began, whether the peer's wake byte was among them,
  // and, once switched, whether the peer's TCP part is all read (the stream's turn).
  std::mutex in_mu;
  uint64_t consumed = 0;
  bool peer_wake_taken = false;
  std::atomic<bool> inflow_done{false};
  // Once switched: the stream's send window has been seen open (AwaitPeerWindow).
  std::atomic<bool> window_seen{false};
};

// The provider a connection to `peer` (canonical address) would move to: shm if the peer is on
// this host and the configuration allows, else null (the connection is no candidate).
fabric::Provider* LateProviderFor(const sockaddr_storage& peer);

// Called when a connected (or connecting) socket settles on kernel TCP, with LateProviderFor's
// answer: makes it a candidate if there is a provider. `active`: it was connect()ed (not accepted).
void ConsiderLateUpgrade(SanSocket& s, bool active, const sockaddr_storage& peer,
                         fabric::Provider* provider);

// Why a kernel TCP socket is not on shm (sanstat, san_getinfo): a candidate whose move was given
// up says why; otherwise the reason it settled with.
const std::string& FallbackReason(const SanSocket& s);

// close() or shutdown() of a candidate, or its fd passed to another process (`try_switch`):
// switches first if the channel is ready (then the socket is a SAN one), else gives the set-up
// up, saying `why` (waiting, bounded, for a switch the peer's obliges). san_upgrade (not
// `try_switch`): gives it up.
void EndLateUpgrade(SanSocket& s, bool try_switch, const char* why);
// A candidate whose move has not begun stays kernel TCP for good, saying `why`: true (true too if
// it had already given up). False while a move is under way, which only EndLateUpgrade can end,
// with the connection's fds and threads: not from a vfork child. Takes the candidate's lock and
// changes memory only (no system call), so a vfork child may call it.
bool KeepLateOnTcp(SanSocket& s, const char* why);
// close() of a candidate: EndLateUpgrade(s, true, "closed first"), at the cost of a lock when its
// move never began (the common end of a short connection: nothing to end, no reason to keep).
void CloseLateUpgrade(SanSocket& s);

// A nonblocking send on a socket that moved (on the stream now): the upper end switches first,
// and its send window opens only with the lower end's WAKEUP, which comes at the lower end's next
// call (the wake byte wakes one that sleeps). A kernel socket with an empty send queue takes a
// nonblocking send at once, and programs count on it (sockperf took the EAGAIN as a message not
// sent and waited for its reply forever): until the window has been seen open once, the send
// waits for it, bounded (a few ms: a peer busy elsewhere gets the EAGAIN after all).
void AwaitPeerWindow(SanSocket& s);

// san_upgrade of a candidate: a move whose channel is made (both ends took part) is driven to
// its end, bounded (5 s). True if the socket is kShm now; false otherwise (the caller gives the
// move up and talks in band).
bool FinishLateUpgrade(SanSocket& s);

// The connection thread's step at a lower end's due time: at the end of a try, closes the
// rendezvous nobody came to (it holds an fd, and room in the fd budget: fd_budget.h
// RoomForLateSide; an application that stopped calling must not keep it); for a lower end waiting
// its turn for a slot, opens its side if its application is still in use. Does nothing if another
// thread is taking a step.
void LowerEndDue(SanSocket& s);

// The connection thread's step once the upper end came to the lower end's private rendezvous:
// the lower end takes its half and switches as soon as the upper end's WAKEUP is there, without
// waiting for the application's next call on the socket. Until then the upper end, switched
// already, has no send window: an application busy with other connections (a server echoing
// them one by one while its peer sends on all before reading) would leave it blocked for good,
// each end's send waiting for the other's switch (conn-bench hold, 10,000 connections, hung).
// At the upper end, whose request went out in a data call that did not wait for the answer: takes
// the answer and switches, for an application that makes no further call soon (the lower end
// holds its half and, at its close, waits for our WAKEUP).
// True while worth another look soon (the peer's WAKEUP or answer has not come, or a step is
// running).
bool DriveLateSide(SanSocket& s);

// The data path's entry for a candidate (mode kTcp): advances the set-up if it is due, and
// switches if it can. True if the socket is kShm now (the call goes to the stream).
bool LateStep(SanSocket& s);

// Kernel data calls on a candidate that has not switched. Each returns what the kernel call
// returns, or -1 with errno kLateSwitched when the socket switched meanwhile (the caller
// retries over the stream). A blocking send or sendfile larger than what is left of
// SAN_UPGRADE_BYTES goes out in parts, with a set-up step between them: if the socket switched
// after a part, it returns the bytes sent so far and the caller sends the rest over the stream.
constexpr int kLateSwitched = EXDEV;
// How long a sleep that a candidate's move could leave without a wake-up lasts at a time before
// it looks again: a blocking read on a candidate whose move is under way (here), a poll or an
// epoll_wait whose only SAN-capable members are candidates while a move of the process is under
// way or without a kick (socket/late_kick.h, socket/poll.cc, socket/epoll_set.cc).
constexpr int kLateNapMs = 5;
ssize_t LateKernelSend(SanSocket& s, const iovec* iov, int iovcnt, int flags);
ssize_t LateKernelRecv(SanSocket& s, const iovec* iov, int iovcnt, int flags);
ssize_t LateKernelSendFile(SanSocket& s, int in_fd, off_t* offset, size_t count);

// ---- The inflow, on a switched socket ----
// True while the peer's TCP bytes come first (one atomic load when done).
bool InflowPending(SanSocket& s);
// Reads the peer's next TCP bytes into iov (nonblocking): > 0 bytes; 0 at the kernel socket's
// EOF (the peer closed it without moving); -1 with kLateSwitched when its TCP part is all read
// (read the stream now), EAGAIN when nothing is there yet, or the kernel's error.
ssize_t InflowRecv(SanSocket& s, const iovec* iov, int iovcnt, bool peek);
// FIONREAD of a candidate or of a socket whose inflow runs: the bytes a read would return now
// (the peer's wake byte is not one of them), plus the stream's queue once it is the stream's turn.
size_t LateReadable(SanSocket& s);
// poll(2) events of the inflow: POLLIN when TCP bytes wait (0 when done). `tcp_due` (optional):
// whether bytes of the peer's TCP part are still to be read (its count not known yet, or not all
// consumed), so that a read returns EAGAIN, not the stream's bytes, while the kernel has none.
short InflowRevents(SanSocket& s, bool* tcp_due = nullptr);
// A socket sanlib carries whose kernel socket poll or epoll reports readable: for a candidate the
// readiness may be the peer's wake byte alone (it switched). Takes the move's next step, as the
// read that follows would; true if the socket is kShm now, so its readiness is to be asked of it
// (SocketRevents drops a lone wake byte), not believed from the kernel -- a program must never
// find nothing to read where readiness was reported (wrk counts that EAGAIN as an error).
bool SettleReadable(SanSocket& s);

}  // namespace san
