// ConnectionThread: serves the SAN rendezvous of every listening socket (SOVIA 3.3), so a client's
// connect() completes before the server application calls accept().
//
// For each request it builds the server side of the channel (a proto::Stream over the provider's
// endpoint, receives posted), files it under the 4-tuple the client announced, accepts the
// request and sends the WAKEUP. accept() then claims the channel by the accepted TCP socket's own
// 4-tuple; a TCP connection with no channel (a plain client) stays kernel TCP. A client announces
// its channel before its connect() picks the TCP port, so the tuple comes with client port 0 and
// the client's WAKEUP names the port (wire.h kWakeupNamesSource): an accept() that finds such an
// unnamed channel from its client's address waits (bounded) for the names.
//
// The provider's accept runs in two steps outside the lock (Endpoint::BeginAccept, then
// FinishAccept each time the endpoint's notify_fd wakes this thread's poll: verbs answers with
// rdma_accept and then waits a round trip for the client's RTU), so handshakes overlap: a burst
// of verbs clients is set up in about one round trip, not one each, and accept() calls, sanstat
// and listener changes never wait behind a handshake. The entry is filed first, marked
// `settling`, and a Claim that finds its tuple settling waits (bounded) for the outcome.
//
// Unclaimed channels are dropped when broken (the client gave up), when their listener closes, and
// beyond kMaxPendingPerListener (further requests are rejected: the client falls back to TCP).
// It also serves the process's control socket (control_service.h): sanstat's reports, and claims
// from other processes that accepted a connection whose channel is filed here (handover.h).
//
// Thread-safety: all public methods are thread-safe. The thread starts with the process's first SAN
// socket (EnsureRunning), except in a single-threaded process under the late set-up, which has
// nothing for it to do until a connection lives long enough to move: there it starts when a late
// candidate is due while the process waits (StartIfLateDue), when a move needs it (a private
// rendezvous, a drive), or when the process connects a socket or keeps one on TCP for good
// (socket_ops.cc StartThreadIfConnectionNeedsIt). A process that only listens and accepts short
// connections (an accept-then-fork server's parent) stays single-threaded, and its forks cost
// what they cost without sanlib (docs/sockets.md "The connection thread, started when needed").
// In a fork child the thread does not exist until the child needs one as above, or forks while
// it holds a listener whose rendezvous another process serves (WatchOwner); listeners inherited
// from the parent stay served by the parent's thread.
#pragma once

#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "sanlib/common/file_identity.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/control_service.h"
#include "sanlib/socket/socket_table.h"

namespace san {

class ConnectionThread {
 public:
  static constexpr size_t kMaxPendingPerListener = 1024;

  explicit ConnectionThread(SocketTable& table) : table_(table) {}
  ~ConnectionThread();
  // Starts the thread (and the stat service) if this process has none yet.
  Status EnsureRunning();
  // Whether the process's first SAN socket starts the thread: not in a single-threaded process
  // under the late set-up (StartIfLateDue starts it there).
  static bool StartsWithFirstSocket(bool late_setup);
  // Starts the thread if a late candidate queued while none ran (ScheduleLate) is due: called by
  // candidates' data calls and the calls that wait on candidates, before each sleep (which lasts
  // no longer than MsUntilLateDue). One relaxed load when nothing waits.
  void StartIfLateDue();
  // Milliseconds until StartIfLateDue has a thread to start (at least 1), or -1 if nothing is
  // queued for one: how long a call that waits on candidates may sleep without a look.
  int MsUntilLateDue() const;
  // A late candidate closed: its queued due time goes, if no thread runs to drop it when due.
  void ForgetLate(int fd, uint64_t socket_id);
  // Serves `listener` for the listening socket `listen_fd`, whose bound address is `addr`. A
  // socket may be served by several listeners (one per provider: shm and verbs); RemoveListener
  // ends them all.
  // `late`: a rendezvous private to one connection that runs on kernel TCP (late_upgrade.h),
  // `listen_fd` a token (< -1) rather than a socket: its channel is filed without a WAKEUP (the
  // socket sends it when it switches) and its request is not checked against the address.
  // A late listener names its socket (`late_fd`, `late_socket_id`): once its peer's channel is
  // made, this thread drives the socket's switch (late_upgrade.h DriveLateSide).
  Status AddListener(int listen_fd, const sockaddr_storage& addr,
                     std::unique_ptr<fabric::Listener> listener, uint32_t provider_caps,
                     const proto::StreamParams& params, bool late = false, int late_fd = -1,
                     uint64_t late_socket_id = 0);
  // Stops serving listen_fd. Its unclaimed channels stay claimable by other processes for
  // kOrphanGraceMs (another process may hold the listening socket and accept them: a prefork
  // server whose creator closes its copy), then are aborted; at once if the kernel never
  // listened on the socket (`kernel_listened` false: its listen() failed), since no process can
  // accept their connections.
  void RemoveListener(int listen_fd, bool kernel_listened = true);
  static constexpr uint64_t kOrphanGraceMs = 3000;
  // The process ran out of fds (an application's socket() or accept() failed with EMFILE): stops
  // serving every eager rendezvous, so that their fds (a listening Unix socket and an epoll set
  // each) go back to the application, as the kernel alone would have them free. Their clients are
  // refused from now on and stay kernel TCP; channels already filed stay claimable by accept().
  // Returns how many listeners it stopped serving.
  size_t ReleaseRendezvous();
  // Whether ReleaseRendezvous ever stopped a listener in this process (the reason its later
  // connections give).
  bool released_for_fds() const { return released_for_fds_.load(std::memory_order_relaxed); }
  // The listening socket is now known by another fd number (its first one was closed; a dup
  // remains).
  void RenameListener(int from_fd, int to_fd);
  // The channel the client announced for this accepted connection, or nullptr. Waits (bounded)
  // for one still settling unless `wait` is false. kAnyListener: filed under any listening
  // socket, or orphaned (never a late upgrade's private one).
  static constexpr int kAnyListener = -1;
  std::unique_ptr<proto::Stream> Claim(int listen_fd, const proto::FourTuple& tuple,
                                       bool wait = true);
  // Closes a late upgrade's private listener (AddListener `late`): a request that arrives from
  // now on is refused (its client stays kernel TCP), and the channel of one already taken is
  // returned (after waiting, bounded, for one still settling), as its client may have switched.
  std::unique_ptr<proto::Stream> CloseLateListener(int token, const proto::FourTuple& tuple);
  // Claim by another process that accepted the connection (handover.h): `proof_fd` must be that
  // connection's socket (EPERM otherwise). ENOENT: no channel for the tuple (a plain client);
  // ENXIO: we serve no rendezvous for its address (any more). Never waits (it runs on this
  // thread, which must go on serving): EAGAIN while a channel that may be this one is settling
  // or not named yet; with `last` the caller will not ask again, so those are given up as a
  // waiting Claim gives them up.
  Result<std::unique_ptr<proto::Stream>> ClaimProved(const proto::FourTuple& tuple, int proof_fd,
                                                     bool last);
  // Counts, for sanstat and tests.
  size_t pending_count();
  // How many late upgrades' private listeners this thread serves now. Their number is bounded
  // by the fd budget only (fd_budget.h RoomForLateSide): they wait in an epoll set of their
  // own, so the thread's loop does not grow with them, and a lower end that opens its side when
  // its application is in use finds its upper end dialling soon after (with a few dozen slots,
  // the others' upper ends backed off to dials a second apart while they waited, and held each
  // slot that long once their lower end had it: nginx keep-alive -c 1000 moved 30-70 % of its
  // connections in 5 s).
  size_t late_listener_count();
  // The most late candidates queued while no thread runs: a process holding this many connections
  // at once is a server or a pool, and worth a thread (each close also looks through the queue).
  static constexpr size_t kMaxUnservedLate = 64;
  // A late upgrade candidate (late_upgrade.h): at `due_ns` this thread takes the lower end's
  // timed step (LowerEndDue: closes a side nobody came to, or opens one that waited its turn).
  // Queued also while no thread runs (StartIfLateDue); more than kMaxUnservedLate queued then
  // starts it.
  void ScheduleLate(int fd, uint64_t socket_id, uint64_t due_ns);
  // A late candidate whose channel is under way (the lower end's peer came, or the upper end's
  // request went out): if the application has not switched it kDriveAfterNs from now, this
  // thread does (DriveLateSide).
  void ScheduleDrive(int fd, uint64_t socket_id);
  // A listening socket this process holds (fd `listen_fd`, SanSocket::id `socket_id`) whose
  // rendezvous the live process `owner_pid` serves: this thread watches the owner's exit (a
  // pidfd in its poll set) and takes the rendezvous over when it goes (rendezvous_owner.h
  // WatchForeignRendezvous, before each fork). Starts the thread; once per socket and owner.
  void WatchOwner(int listen_fd, uint64_t socket_id, int owner_pid);

  // pthread_atfork hooks (the lock must not be held across fork). QuiesceForFork runs first of
  // all the runtime's: it waits (at most kQuiesceMs) until the thread is between its steps, asleep
  // in poll(), so that the child finds no lock the thread held mid-step. Not only ours: GCC 12's
  // libasan does not take its allocator's locks across fork(), and a child whose own connection
  // thread then allocates waits forever on a lock held by the parent's thread at the fork.
  void QuiesceForFork();
  void BeforeFork() { mu_.lock(); }
  void AfterForkParent();
  void AfterForkChild();
  // The child of a process that never ran a second thread (Runtime::fork_alone_): no lock was
  // taken and no thread of ours existed; only late due times queued for a thread may be there.
  void AfterForkChildAlone();
  // A child no fork handler ran in (Runtime::AdoptMissedFork): mu_ as BeforeFork leaves it.
  void LockAfterMissedFork() {
    new (&mu_) std::mutex();
    mu_.lock();
  }

 private:
  // A listening socket's kernel identity: what a claimer's proof fd is compared with.
  using SocketId = FileIdentity;
  struct Served {
    int listen_fd;
    SocketId id;
    sockaddr_storage addr;
    std::unique_ptr<fabric::Listener> listener;  // null once released (ReleaseRendezvous)
    uint32_t caps;
    proto::StreamParams params;
    bool late;
    int late_fd = -1;  // a late listener's socket
    uint64_t late_socket_id = 0;
  };
  struct Pending {
    int listen_fd;  // -1 once orphaned
    SocketId listener;
    proto::FourTuple tuple;
    std::unique_ptr<proto::Stream> stream;
    // The serving thread is in Accept/Start for it, without the lock: nobody else touches the
    // stream (Claim waits, DropBroken and RemoveListener leave it to the serving thread).
    bool settling = false;
    // Its listening socket was closed here (RemoveListener) at this time: only ClaimProved can
    // take it, until the grace period ends (kNeverAcceptable: aborted at the next pass).
    uint64_t orphaned_ns = 0;
    static constexpr uint64_t kNeverAcceptable = 1;
    bool late = false;  // filed without a WAKEUP (AddListener)
    // Its client is gone with an exchange left to deliver: when to ask the kernel again whether
    // its connection can still be accepted (StillAcceptable).
    uint64_t next_acceptable_check_ns = 0;
    // Filed with client port 0 and not named yet when a Claim gave up waiting for it: Claims no
    // longer wait for it (it can still be named and claimed).
    bool waited_out = false;
  };
  static constexpr uint64_t kAcceptableCheckMs = 200;
  // Whether a pending channel whose client is gone can still be claimed (mu_ held).
  static bool StillAcceptable(Pending& p, uint64_t now);

  static void* Main(void* self);
  void Run();
  // Serves the requests waiting at one listener: `which` for a listening socket's rendezvous,
  // or a late upgrade's by `late_token` (which then is null).
  void ServeRequests(const fabric::Listener* which, int late_token = 0);
  // FinishAccept on every handshake in progress; those that ended are settled.
  void AdvanceHandshakes();
  // Ends a settling entry: on success sends the WAKEUP; on failure (or if its listener closed
  // meanwhile) aborts and drops it. Wakes Claims waiting for it.
  void Settle(proto::Stream* s, Status st);
  // Drops unclaimed channels that can no longer be claimed (their client gone with nothing to
  // deliver, or an orphan past its grace period); names unnamed ones first (mu_ held).
  void DropBrokenLocked();
  // Fills in the client port of channels filed before their client's connect() chose it, from
  // the client's WAKEUP (Stream::PeerSourcePort); aborts one named for a connection a Claim gave
  // up on (RememberGivenUpLocked). mu_ held.
  void NameUnnamedLocked();
  // One look through the filed channels for a claim of `tuple` under `listen_fd` (Claim): the
  // channel, taken off the books, or why one may still come. mu_ held.
  struct Look {
    std::unique_ptr<proto::Stream> stream;
    bool settling = false;  // one for this tuple is still settling
    bool unnamed = false;   // unnamed ones from its client's host, not waited out yet
  };
  Look LookLocked(int listen_fd, const proto::FourTuple& tuple);
  // Filed under the claim's listener for its server address.
  static bool ClaimsUnder(const Pending& p, int listen_fd, const proto::FourTuple& tuple);
  // Filed from the claim's client host, port not named yet: it may be this connection's.
  static bool UnnamedCandidate(const Pending& p, int listen_fd, const proto::FourTuple& tuple);
  // A claim stops waiting for `tuple`: its connection is kernel TCP, so a channel named for it
  // later must not stay, and later claims do not wait for the unnamed ones it waited for (mu_
  // held).
  void GiveUpLocked(int listen_fd, const proto::FourTuple& tuple);
  void RememberGivenUpLocked(const proto::FourTuple& tuple);
  struct GivenUp {
    proto::FourTuple tuple;
    uint64_t at_ns;
  };
  static constexpr size_t kMaxGivenUp = 64;
  static constexpr uint64_t kGivenUpNs = 60ull * 1000000000;
  std::vector<GivenUp> given_up_;  // (mu_)
  // Stops serving `listen_fd` (mu_ held): its listeners, which the caller destroys only after
  // waking the thread out of a poll() that may still watch them.
  std::vector<std::unique_ptr<fabric::Listener>> UnserveLocked(int listen_fd);
  Status StartThreadLocked();

  SocketTable& table_;
  // Held by the thread while it works, released while it sleeps in poll() (see QuiesceForFork).
  std::timed_mutex step_mu_;
  bool quiesced_ = false;  // QuiesceForFork holds step_mu_ (the forking thread's alone)
  std::atomic<bool> stepping_ready_{false};  // the thread holds step_mu_: its start-up is over
  ControlService service_;                   // touched by the thread only, once running
  std::atomic<bool> released_for_fds_{false};
  std::mutex mu_;
  std::condition_variable settled_;  // a settling entry finished (mu_)
  std::vector<Served> served_;       // listening sockets' rendezvous (not late)
  // Late upgrades' private rendezvous by token, each in late_set_ (its token the event's data).
  std::unordered_map<int, Served> late_served_;
  // epoll, made with the first late listener (mu_; a fork child's copy is the parent's instance).
  UniqueFd late_set_;
  // Serves the requests of the late listeners `set_fd` (late_set_) reports ready (the thread's,
  // no lock).
  void ServeLateRequests(int set_fd);
  std::vector<Pending> pending_;
  // Settling entries whose handshake is in progress (their streams are owned by pending_; only
  // this thread removes a settling entry). The thread's alone: no lock.
  std::vector<proto::Stream*> handshakes_;
  struct LateDue {
    int fd;
    uint64_t socket_id;
    uint64_t due_ns;
    uint32_t drives = 0;  // 0: LowerEndDue; else DriveLateSide, this many tries left
  };
  std::vector<LateDue> late_;  // in due order (mu_)
  // Inserts in due order; true if it is the first due now.
  bool InsertLateLocked(const LateDue& d);
  // Queues `d` and wakes the thread if it is the first due; `start`: starts the thread if it is
  // not running (else `d` waits for a thread: StartIfLateDue).
  void Schedule(const LateDue& d, bool start);
  // The first due time in late_ while no thread runs to serve it, else kNoneDue (mu_ to write).
  static constexpr uint64_t kNoneDue = ~uint64_t{0};
  std::atomic<uint64_t> unserved_due_ns_{kNoneDue};
  void NoteUnservedLocked() {
    unserved_due_ns_.store(running_ || late_.empty() ? kNoneDue : late_.front().due_ns,
                           std::memory_order_relaxed);
  }
  // A drive of a late candidate's switch (DriveLateSide), from kDriveAfterNs on.
  static LateDue DriveDue(int fd, uint64_t socket_id);
  // When, how often and how many times a switch is driven once the peer came (DriveLateSide).
  // Not at once: an application that makes calls on the socket switches it itself within
  // microseconds, and with the thread switching such sockets too, wrk against nginx under sanrun
  // counted read errors in 4 of 8 runs (cause not found; 0 of 8 without the drive).
  static constexpr uint64_t kDriveAfterNs = 20000000;
  static constexpr uint64_t kDriveEveryNs = 1000000;
  static constexpr uint32_t kDriveTries = 200;
  void RunDueLateLocked(std::unique_lock<std::mutex>& lock);
  struct OwnerWatch {
    int listen_fd;
    uint64_t socket_id;
    int owner;
    UniqueFd pidfd;  // invalid: the owner was gone already when the watch began
  };
  std::vector<OwnerWatch> watches_;  // (mu_)
  // Takes the rendezvous of each watch whose owner has gone over (the thread's, no lock held).
  void TakeOverFromGone(const std::vector<OwnerWatch>& gone);
  UniqueFd control_;  // eventfd: the set of listeners changed, or stop
  pthread_t thread_{};
  bool running_ = false;
  bool stopping_ = false;
};

}  // namespace san
