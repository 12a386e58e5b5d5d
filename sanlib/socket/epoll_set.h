// EpollSet: epoll over SAN sockets mixed with kernel fds, for one epoll instance.
//
// The application's epoll fd is a real kernel epoll instance: kernel fds are registered in it
// unchanged (their events come from the kernel, with the application's data). A SAN socket's
// readiness lives in user space (proto::Stream), so its registration is kept here instead:
// epoll_wait computes its events from SAN state (level- or edge-triggered, EPOLLONESHOT), merges
// the kernel's, and when nothing is ready spins, then arms every member's doorbell, re-checks, and
// sleeps in one poll() over the epoll fd itself plus each member's doorbell, wake-up eventfd and
// kernel socket (peer death). Nothing arriving between "checked empty" and "asleep" is missed: the
// doorbell is armed before the last check. SAN members are collected first; a call that they
// filled to `max_events` owes the kernel's fds a turn, which the next call gives first (the
// kernel's own epoll reports every ready fd in turn; a set with more ready SAN members than slots
// never reported its listener).
//
// A socket not yet connected when registered (socket(), epoll_ctl(ADD), then a nonblocking
// connect(), as event loops do) is registered with the kernel as well and marked pending; once it
// turns out to be a SAN connection its kernel registration is removed and its events come from
// here; if it falls back to TCP it simply stays a kernel registration.
//
// Edge-triggered members report when their ready mask changes, a packet arrived since the last
// report, or, readable, when a read returned EAGAIN since (SanSocket::reads_drained: bytes that
// come by the kernel socket change neither the mask nor the packet count); never less often than
// the kernel (which also re-reports on every new segment).
//
// Every call looks at every member (the set has no ready list), but a member whose stream saw no
// operation and whose endpoint holds nothing new since its last full look is answered from that
// look (its ReadinessStamp, socket_ops.h: a few atomic loads instead of locking the stream and
// polling its endpoint), and fully looked at again at least every kStampReuses calls. An idle
// member costs about a quarter of what it did (conn-bench hold: epoll_wait(0) over 700 idle shm
// connections 43 us against 187 without stamps; the kernel's 0.14). The refresh before it
// (dropping closed members, settling pending ones) passes over the members only when something
// changed (RefreshLocked).
// Members whose fd was closed are dropped lazily (they are matched by fd and socket id).
//
// epoll_ctl on a SAN socket wakes the threads asleep in epoll_wait on the set, as the kernel wakes
// them for a ready fd added or modified: a member they do not watch yet may be ready already
// (gRPC adds an accepted connection from one thread while another sleeps in epoll_wait; its first
// request waited for that sleep's timeout). Threads asleep here are woken on their own eventfds
// (socket/waiter_set.h); a thread asleep in the kernel's epoll_wait (the set had no SAN member when
// it went to sleep) by a "kick": an eventfd of ours registered edge-triggered in the kernel
// instance, written on every such epoll_ctl, whose events never reach the application (DropKicks).
//
// Sleeping is O(1) in the kernel however many members there are: the set keeps an epoll instance
// of its own (`inner_`) in which each SAN member's doorbell and kernel socket are registered once,
// edge-triggered, keyed by the socket's id; a sleep is one ppoll over the application's epoll fd,
// that instance and the thread's wake-up eventfd (a ppoll over three fds per member cost wrk
// -c 32 most of its time). Arming the doorbells and collecting stay a pass over the members in
// user memory. Registrations are by fd number, so a closed member's are never removed by number
// (the number may name another file by then): the kernel drops them with the file, and an event
// of an id that is no longer a member is ignored. A fork child, which shares the instance with its
// parent, and a set with a member that is moving to TCP sleep the old way (a pollfd per fd). Once
// the move is done (the relay finished, the stream drained: mode kTcp) the member is handed to the
// kernel instance (HandBackLocked, ControlKernelSocket): from then on it is a kernel fd of the set
// like any other, with the kernel's level- and edge-triggered rules exactly (a member left here
// was polled level-triggered on its kernel socket: an edge-triggered one with bytes unread woke
// every sleep at once, spinning, and a MOD or DEL of it went to the kernel, which had no
// registration: ENOENT, and the member was lost).
//
// Thread-safety: all methods are thread-safe; several threads may wait on one set. A set is used
// only under the registry's shared lock (never across a sleep), so closing the epoll fd frees it
// safely; sockets are touched only under the socket table's lifetime pin (socket_table.h).
#pragma once

#include <poll.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "sanlib/socket/late_kick.h"
#include "sanlib/socket/san_socket.h"
#include "sanlib/socket/socket_ops.h"

namespace san {

class EpollSet {
 public:
  ~EpollSet();
  // epoll_ctl for a SAN socket `s` (fd) on epoll fd `epfd`. Returns what epoll_ctl returns.
  static int Control(int epfd, int op, int fd, SanSocket& s, epoll_event* event);
  // fd is not a SAN socket (any more): drops a stale member of epfd's set for it, if any.
  static void DropFd(int epfd, int fd);
  // epoll_ctl for `s` (fd), a SAN socket that is a plain kernel socket now (its connection moved
  // to kernel TCP and the relay is done: tcp_move.h): a member registered while it was on shm
  // (the kernel holds no registration of it) is handed to the kernel -- MOD registers it there
  // with the new events, DEL just drops it, ADD is EEXIST --; otherwise the kernel's call. Returns
  // what epoll_ctl returns.
  static int ControlKernelSocket(int epfd, int op, int fd, SanSocket& s, epoll_event* event);
  // True if epoll_wait on epfd needs this layer (the set has members); false: a plain epoll.
  static bool Involved(int epfd);
  // True if the set has members that are not pending (SAN connections now).
  static bool HasSanMembers(int epfd);
  // True if the set has pending members, which may become SAN ones (not settled yet, or late
  // upgrade candidates): a thread asleep in the kernel must look again now and then.
  static bool HasMembersThatMayMove(int epfd);
  // epoll_pwait on epfd (sigmask may be null).
  static int Wait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                  const sigset_t* sigmask, KernelEpollWaits kernel_waits);
  // The epoll fd was closed (or replaced by dup2): forget its set. A thread still waiting on it
  // gets EBADF when it wakes.
  static void Forget(int epfd);
  // epfd is a new epoll instance made by this process (epoll_create): a fresh set that knows
  // every registration in it is its own until the process forks (RegistrationsAreOurs).
  static void Created(int epfd);
  // epoll_pwait on epfd while it has no SAN member: the kernel's, without our kicks; a thread
  // kicked awake because SAN members arrived goes on in Wait for the rest of its time.
  static int KernelWait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                        const sigset_t* sigmask, KernelEpollWaits kernel_waits);
  // Removes our kick events (the set's and the late kick) from the n events the kernel returned;
  // returns how many are left.
  static int DropKicks(epoll_event* events, int n);
  // Registers the process's late kick (late_kick.h) in epfd's kernel instance, once per kick; false
  // if it cannot be (no kick, no set, the kernel refused): the caller naps.
  static bool WatchLateKick(int epfd);
  // Before a sleep on epfd, which has members that may move: registers the late kick and counts
  // the caller among its sleepers (`kickable`, held until the sleep ends), then says whether the
  // sleep must be a nap (a move under way or ended since the set looked, or no kick).
  static bool MustNapOnCandidates(int epfd, std::optional<late_kick::Sleeper>* kickable);
  // Of the n events the kernel returned, those of members that may move to shm (late upgrade
  // candidates): a readable one takes its move's step (SettleReadable), and a member on shm now
  // gets its events from SAN state instead -- none at all if the kernel's readiness was the
  // peer's wake byte alone. Returns how many events are left.
  static int SettleKernelEvents(int epfd, epoll_event* events, int n);
  // True if the kernel's events for epfd's pending members are the whole truth: no late move of
  // this process is under way, and no socket settled on shm, since the set last looked at its
  // members (late_phase.h). Then SettleKernelEvents has nothing to do, and a set with no SAN
  // member sleeps in the kernel at once.
  static bool KernelEventsSuffice(int epfd);
  // True if the kernel alone can wait on epfd: the set has no member, or no SAN member and the
  // kernel's events suffice (above). One look-up, for every epoll_wait.
  static bool KernelCanWait(int epfd);

 private:
  struct Member {
    int fd;
    SanSocket* socket;
    uint64_t socket_id;
    uint32_t events;  // as registered (EPOLLIN, EPOLLET, EPOLLONESHOT, ...)
    epoll_data_t data;
    bool pending;            // not connected when registered: the kernel holds a registration too
    bool disabled = false;   // EPOLLONESHOT fired; re-enabled by EPOLL_CTL_MOD
    bool reported = false;   // edge-triggered: has reported since (re)registration
    uint32_t last_mask = 0;  // edge-triggered: mask when last looked at
    uint64_t last_packets = 0;  // edge-triggered: packets received at the last report
    // Edge-triggered: the socket's reads_drained at the last report. A read that returned EAGAIN
    // since makes readiness to read a new edge, whatever else changed: bytes that come by the
    // kernel socket (the peer's TCP part after a move, a connection moved to TCP) change neither
    // the mask nor the stream's packet count.
    uint64_t last_drained = 0;
    int bell_fd = -1;          // the doorbell registered in inner_ (-1: none)
    bool tcp_watched = false;  // its kernel socket is registered in inner_ (peer death)
    // The last full look (CollectLocked): its mask and what it depended on, reused while that
    // holds (StampHolds), up to kStampReuses times in a row. Reset when `events` change.
    ReadinessStamp stamp = {};
    uint32_t stamp_mask = 0;
    uint32_t stamp_reuses = 0;
  };
  // A full look at least this often per member, whatever the stamp says: a bound on any staleness
  // the stamp's contract allows.
  static constexpr uint32_t kStampReuses = 256;
  // The member's events now, from its stamp when that holds, else a full look (which renews it).
  static uint32_t LookLocked(Member& m);

  // The set for epfd, made if `create`; call with the registry's lifetime lock held (shared).
  static EpollSet* Find(int epfd, bool create);
  int ControlLocked(int epfd, int op, int fd, SanSocket& s, epoll_event* event);
  // Drops fd's member; `live`: fd still names its socket, so its registrations in inner_ can be
  // ended by number.
  void DropFdLocked(int fd, bool live);
  // Appends a member (fd not a member yet), keeping the fd index current.
  void AddMemberLocked(Member m);
  // Drops members whose socket is gone, settles pending ones and hands the kernel those whose
  // socket became a plain kernel socket (HandBackLocked) (mu_ and the pin held).
  void RefreshLocked(int epfd);
  // m's socket is a plain kernel socket now: registers it in the kernel instance epfd with m's
  // events and data, unless a fired EPOLLONESHOT disabled it (that one waits for its MOD). True:
  // the kernel holds it, and m is to be dropped (its registrations in inner_ are ended).
  bool HandBackLocked(int epfd, Member& m);
  // epoll_ctl `op` for m, registered while on shm, whose socket is a plain kernel socket now
  // (ControlKernelSocket, and ControlLocked when the move ended after the caller looked).
  int ControlHandedBackLocked(int epfd, int op, Member& m, epoll_event* event);
  // RefreshLocked, taking the registry's, the table's and the set's locks.
  static void Refresh(int epfd);
  // Appends SAN members' events (up to max) to events; returns how many (mu_ and the pin held).
  int CollectLocked(epoll_event* events, int max);
  // CollectLocked on epfd's set, locking it (0 if the set is gone).
  static int TopUp(int epfd, epoll_event* events, int max);
  Member* FindLocked(int fd);
  // Wakes every thread waiting on the set (mu_ held): ours and the kernel's (the kick).
  void WakeWaitersLocked(int epfd);
  // Registers the doorbells (and, where `watch_tcp` says so, the kernel sockets) of `members` in
  // inner_, made on first use; false if this sleep must poll them the old way (mu_ held).
  bool WatchLocked(Member* const* members, const bool* watch_tcp, size_t count);
  // Ends m's registrations in inner_ while its fd still names its socket (mu_ held).
  void UnwatchLocked(Member& m);
  // Reads the events inner_ holds: the ids of members whose doorbell rang or whose kernel socket
  // changed (mu_ held).
  void DrainInnerLocked(std::vector<uint64_t>* bells, std::vector<uint64_t>* tcps);

  // After a sleep that used `inner` (epfd's set's instance then): marks, in the old layout's
  // pollfds, the doorbells that rang and the kernel sockets that changed, for FinishSleep.
  static void MarkFired(int epfd, int inner, const std::vector<SleepWatch>& watches,
                        std::vector<pollfd>* fds);

  // Whether the kernel instance holds no registration but the ones made through this set: it was
  // made by this process (Created), which has not forked since (a child shares the instance and
  // may change what it holds). Then an EPOLL_CTL_MOD that asks for what a pending member has
  // already, level-triggered, changes nothing in the kernel and is not made (wrk and
  // redis-benchmark make two such calls per connection). A raw clone() child is not seen here.
  bool RegistrationsAreOursLocked() const;
  pid_t private_pid_ = 0;  // Created by this process (0: not known to be)
  uint64_t private_forks_ = 0;

  int inner_ = -1;       // the set's own epoll instance (above); -1: none yet, or it failed
  pid_t inner_pid_ = 0;  // the process that made it (a fork child must not change it)

  std::mutex mu_;
  WaiterSet sleepers_;  // threads asleep in Wait on this set
  int kick_ = -1;       // eventfd registered in the kernel instance (-1: not yet, or failed)
  bool kick_tried_ = false;
  // The late kick registered in the kernel instance: its process's pid << 32 | its fd (~0: none).
  std::atomic<uint64_t> late_kick_{~uint64_t{0}};
  std::atomic<size_t> size_{0};  // members_.size(), for the lock-free Involved()
  // Members not pending (their events come from here): while there are none, a waiter sleeps in
  // the kernel (KernelWait) and pending members' kernel registrations wake it.
  std::atomic<size_t> san_size_{0};
  // The readiness generation (late_phase.h) RefreshLocked last started from (never one yet).
  std::atomic<uint64_t> seen_generation_{~uint64_t{0}};
  // The socket table's Changes() RefreshLocked last started from, and whether members joined
  // since (then it looks whatever the counts say).
  uint64_t seen_changes_ = ~uint64_t{0};
  bool refresh_due_ = true;
  // Recounts the sizes above, if members_ changed since (sizes_dirty_).
  void PublishSizesLocked();
  // A member joined, or stopped being pending: the pending index and the counts are stale.
  void CountsChangedLocked() { pending_index_dirty_ = sizes_dirty_ = san_index_dirty_ = true; }
  // Members left in bulk (RefreshLocked): the fd index is stale too (members after them moved
  // down). One member leaving (DropFdLocked) keeps the index current.
  void MemberLeftLocked() {
    CountsChangedLocked();
    fd_index_dirty_ = true;
  }
  // Pending members as (registered data, index in members_), sorted, for SettleKernelEvents:
  // rebuilt after members_ changed (mu_ held).
  const std::vector<std::pair<uint64_t, size_t>>& PendingByDataLocked();
  // The pending member registered with `data`, or null if none or several are (mu_ held), for
  // one of `lookups` events: by a scan of members_ while the index is stale and the scans cost
  // less than kScanInsteadOfIndex member looks, else by the index.
  const Member* PendingWithDataLocked(uint64_t data, int lookups);
  static constexpr size_t kScanInsteadOfIndex = 4096;
  std::vector<Member> members_;
  std::vector<std::pair<uint64_t, size_t>> pending_by_data_;
  bool pending_index_dirty_ = true;
  // fd -> index in members_, for FindLocked (an event loop's epoll_ctl per request on a set of
  // thousands); kept current as members come and go one by one, rebuilt after a bulk removal.
  // By fd number (sockets' numbers are below the socket table's limit), the member's index + 1,
  // 0 for none: a look-up is one load, and a member coming or going allocates nothing.
  std::vector<uint32_t> fd_index_;
  bool fd_index_dirty_ = false;
  void IndexLocked(int fd, size_t at);  // fd_index_[fd] = at + 1, growing it as needed
  bool sizes_dirty_ = false;
  size_t next_ = 0;  // where the next scan starts in san_index_ (fairness among ready members)
  // Indices in members_ of the members that are not pending, for the collect: a set of thousands
  // of pending kernel-TCP members and a few on shm passed over all of them at every call. Rebuilt
  // after members_ changed (CountsChangedLocked: a member joined, left, moved, or settled).
  const std::vector<uint32_t>& SanIndexLocked();
  std::vector<uint32_t> san_index_;
  bool san_index_dirty_ = true;
  // The last Wait filled every slot with SAN members and left the kernel's fds (the listener, TCP
  // connections, pipes) unasked: the next one gives them their turn first (Wait).
  bool kernel_owed_ = false;
};

}  // namespace san
