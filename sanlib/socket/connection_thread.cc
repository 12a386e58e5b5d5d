#include "sanlib/socket/connection_thread.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "sanlib/common/clock.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/fork_held_mutex.h"
#include "sanlib/common/fork_path.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/own_thread.h"
#include "sanlib/common/peer_uid.h"
#include "sanlib/socket/fd_budget.h"
#include "sanlib/socket/late_upgrade.h"
#include "sanlib/socket/rendezvous_owner.h"
#include "sanlib/socket/socket_ops.h"

namespace san {

ConnectionThread::~ConnectionThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    stopping_ = true;
  }
  eventfd_write(control_.get(), 1);
  pthread_join(thread_, nullptr);
}

Status ConnectionThread::StartThreadLocked() {
  if (running_) return Status::Ok();
  if (!control_.valid()) {
    control_.reset(PlaceLow(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)));
    if (!control_.valid()) return Status::FromErrno("eventfd");
  }
  if (const int rc = StartOwnThread(&thread_, &ConnectionThread::Main, this); rc != 0) {
    return Status(rc, "pthread_create");
  }
  running_ = true;
  NoteUnservedLocked();  // what was queued is the thread's now
  // Until the thread holds step_mu_, QuiesceForFork cannot tell that it is still starting up
  // (allocating): wait for it, bounded (a new thread runs within microseconds).
  for (int i = 0; i < 100000 && !stepping_ready_.load(std::memory_order_acquire); ++i) {
    sched_yield();
  }
  return Status::Ok();
}

Status ConnectionThread::EnsureRunning() {
  std::lock_guard<std::mutex> lock(mu_);
  return StartThreadLocked();
}

bool ConnectionThread::StartsWithFirstSocket(bool late_setup) {
  // Under the eager set-up the thread serves every listener's rendezvous from listen() on. A
  // program that runs threads of its own loses nothing to ours (its forks take glibc's
  // multithreaded path anyway), and ours started early grows the fd table while it is still
  // cheap (fd_placement.h GrowFdTableWhileAlone).
  return !late_setup || !OnlyThreadEver();
}

void ConnectionThread::StartIfLateDue() {
  const uint64_t due = unserved_due_ns_.load(std::memory_order_relaxed);
  if (due == kNoneDue || due > NowNs()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ || stopping_) return;
  if (Status st = StartThreadLocked(); !st.ok()) {
    SAN_LOG_WARN("connection thread: %s", st.ToString().c_str());
  }
}

int ConnectionThread::MsUntilLateDue() const {
  const uint64_t due = unserved_due_ns_.load(std::memory_order_relaxed);
  if (due == kNoneDue) return -1;
  const uint64_t now = NowNs();
  // A due time passed already means StartIfLateDue could not start the thread: look in a while.
  if (due <= now) return kLateNapMs;
  const uint64_t ms = (due - now + 999'999) / 1'000'000;
  return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

void ConnectionThread::ForgetLate(int fd, uint64_t socket_id) {
  if (unserved_due_ns_.load(std::memory_order_relaxed) == kNoneDue) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;  // the thread drops it when due
  // Mostly the last one queued (a short connection closed before the next came).
  for (auto it = late_.end(); it != late_.begin();) {
    --it;
    if (it->fd == fd && it->socket_id == socket_id) it = late_.erase(it);
  }
  NoteUnservedLocked();
}

Status ConnectionThread::AddListener(int listen_fd, const sockaddr_storage& addr,
                                     std::unique_ptr<fabric::Listener> listener,
                                     uint32_t provider_caps, const proto::StreamParams& params,
                                     bool late, int late_fd, uint64_t late_socket_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Status st = StartThreadLocked();
    if (!st.ok()) return st;
    if (late) {
      // In late_set_, which the thread's poll watches once made: no wake-up, but the first.
      const bool first = !late_set_.valid();
      if (first) {
        // Made with the first move (a process without one holds no fd more than before).
        late_set_.reset(PlaceLow(kernel::epoll_create1(EPOLL_CLOEXEC)));
        if (!late_set_.valid()) return Status::FromErrno("epoll_create1");
      }
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd;
      if (kernel::epoll_ctl(late_set_.get(), EPOLL_CTL_ADD, listener->fd(), &ev) != 0) {
        return Status::FromErrno("epoll_ctl");
      }
      late_served_.emplace(listen_fd, Served{listen_fd, SocketId{}, addr, std::move(listener),
                                             provider_caps, params, true, late_fd, late_socket_id});
      if (!first) return Status::Ok();
    } else {
      served_.push_back(Served{listen_fd, IdentityOf(listen_fd), addr, std::move(listener),
                               provider_caps, params, false, late_fd, late_socket_id});
    }
  }
  eventfd_write(control_.get(), 1);
  return Status::Ok();
}

std::vector<std::unique_ptr<fabric::Listener>> ConnectionThread::UnserveLocked(int listen_fd) {
  std::vector<std::unique_ptr<fabric::Listener>> listeners;  // one per provider serving the socket
  if (auto late = late_served_.find(listen_fd); late != late_served_.end()) {
    // Out of the set first: a fork child may hold a copy of its fd, which would keep it there.
    kernel::epoll_ctl(late_set_.get(), EPOLL_CTL_DEL, late->second.listener->fd(), nullptr);
    listeners.push_back(std::move(late->second.listener));
    late_served_.erase(late);
    return listeners;
  }
  for (auto it = served_.begin(); it != served_.end();) {
    if (it->listen_fd == listen_fd) {
      listeners.push_back(std::move(it->listener));
      it = served_.erase(it);
    } else {
      ++it;
    }
  }
  return listeners;
}

void ConnectionThread::RemoveListener(int listen_fd, bool kernel_listened) {
  std::vector<std::unique_ptr<fabric::Listener>> listeners;
  bool late = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    late = late_served_.count(listen_fd) != 0;  // out of late_set_ in UnserveLocked
    listeners = UnserveLocked(listen_fd);
    // Other processes may still hold the listening socket (fork, SCM_RIGHTS) and accept these
    // connections: their clients wait on the channels filed here. A settling entry is orphaned
    // by the serving thread once its Accept returns (Settle).
    const uint64_t orphaned = kernel_listened ? NowNs() : Pending::kNeverAcceptable;
    for (Pending& p : pending_) {
      if (p.listen_fd != listen_fd) continue;
      if (!p.settling) {
        p.listen_fd = -1;
        p.orphaned_ns = orphaned;
      } else if (!kernel_listened) {
        p.orphaned_ns = orphaned;  // kept by Settle
      }
    }
  }
  // The thread may still be inside poll() on the old listener's fd: wake it before it is closed.
  if (!late && control_.valid()) eventfd_write(control_.get(), 1);
}

size_t ConnectionThread::ReleaseRendezvous() {
  std::vector<std::unique_ptr<fabric::Listener>> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The entries stay (without a listener): the listening socket is still served, so channels
    // filed or settling under it remain its accept()'s. Late ones are one connection's private
    // rendezvous, whose move is under way.
    for (Served& v : served_) {
      if (!v.late && v.listener) listeners.push_back(std::move(v.listener));
    }
  }
  if (listeners.empty()) return 0;
  released_for_fds_.store(true, std::memory_order_relaxed);
  // The thread may be inside poll() on their fds: wake it before they close (on return).
  if (control_.valid()) eventfd_write(control_.get(), 1);
  return listeners.size();
}

std::unique_ptr<proto::Stream> ConnectionThread::CloseLateListener(int token,
                                                                   const proto::FourTuple& tuple) {
  {
    std::vector<std::unique_ptr<fabric::Listener>> listeners;
    std::lock_guard<std::mutex> lock(mu_);
    listeners = UnserveLocked(token);  // out of late_set_ (no poll() of the thread's watches it)
  }
  // Entries filed under the token stay under it (ServeRequests, Settle): ours to take.
  return Claim(token, tuple);
}

void ConnectionThread::RenameListener(int from_fd, int to_fd) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Served& s : served_) {
    if (s.listen_fd == from_fd) s.listen_fd = to_fd;
  }
  for (Pending& p : pending_) {
    if (p.listen_fd == from_fd) p.listen_fd = to_fd;
  }
}

namespace {

using proto::PortField;
using proto::PortOf;

// Whether `a` and `b` are one address, their ports aside.
bool SameHost(sockaddr_storage a, sockaddr_storage b) {
  PortField(a) = 0;
  PortField(b) = 0;
  return proto::SameAddress(a, b);
}

// Whether a listener bound to `served` takes connections to `dst` (same port; same address or
// the wildcard).
bool Takes(const sockaddr_storage& served, const sockaddr_storage& dst) {
  if (served.ss_family != dst.ss_family || PortOf(served) != PortOf(dst)) return false;
  sockaddr_storage any{};
  any.ss_family = served.ss_family;
  PortField(any) = PortOf(served);
  return proto::SameAddress(served, dst) || proto::SameAddress(served, any);
}

}  // namespace

Result<std::unique_ptr<proto::Stream>> ConnectionThread::ClaimProved(const proto::FourTuple& tuple,
                                                                     int proof_fd, bool last) {
  // The claimer holds the very connection the channel was filed for: a 4-tuple names one
  // connection in a network namespace, and the control socket is namespace-scoped too.
  if (!HoldsConnection(proof_fd, tuple.server, tuple.client)) {
    return Status(EPERM, "handover proof");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const bool serves = std::any_of(served_.begin(), served_.end(), [&](const Served& s) {
    return !s.late && Takes(s.addr, tuple.server);
  });
  // Filed under any listener of ours (a SO_REUSEPORT sibling's clients come here too), or
  // orphaned by a listener we closed.
  DropBrokenLocked();
  Look look = LookLocked(kAnyListener, tuple);
  if (look.stream) return std::move(look.stream);
  if (look.settling || look.unnamed) {
    if (!last) return Status(EAGAIN, "handover: channel not ready");
    GiveUpLocked(kAnyListener, tuple);
  }
  return Status(serves ? ENOENT : ENXIO, "handover claim");
}

bool ConnectionThread::ClaimsUnder(const Pending& p, int listen_fd, const proto::FourTuple& tuple) {
  return (listen_fd == kAnyListener ? !p.late : p.listen_fd == listen_fd) &&
         proto::SameAddress(p.tuple.server, tuple.server);
}

bool ConnectionThread::UnnamedCandidate(const Pending& p, int listen_fd,
                                        const proto::FourTuple& tuple) {
  return ClaimsUnder(p, listen_fd, tuple) && PortOf(p.tuple.client) == 0 &&
         SameHost(p.tuple.client, tuple.client);
}

ConnectionThread::Look ConnectionThread::LookLocked(int listen_fd, const proto::FourTuple& tuple) {
  Look look;
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (UnnamedCandidate(*it, listen_fd, tuple)) {
      look.unnamed |= !it->waited_out;
      continue;
    }
    if (!ClaimsUnder(*it, listen_fd, tuple) ||
        !proto::SameAddress(it->tuple.client, tuple.client)) {
      continue;
    }
    if (it->settling) {
      look.settling = true;
      continue;
    }
    look.stream = std::move(it->stream);
    pending_.erase(it);
    return look;
  }
  return look;
}

void ConnectionThread::GiveUpLocked(int listen_fd, const proto::FourTuple& tuple) {
  // Should one of them be named for this connection after all, it is aborted then (its client
  // errs out) rather than left with a peer that took the connection for TCP. Later claims do not
  // wait for them again: a client stopped between its request and its connect() delays one
  // accept(), not every one.
  bool unnamed = false;
  for (Pending& p : pending_) {
    if (!UnnamedCandidate(p, listen_fd, tuple)) continue;
    unnamed |= !p.waited_out;
    p.waited_out = true;
  }
  if (unnamed) RememberGivenUpLocked(tuple);
}

std::unique_ptr<proto::Stream> ConnectionThread::Claim(int listen_fd, const proto::FourTuple& tuple,
                                                       bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  // A channel still settling (its Accept waits for the client's last handshake message) is
  // almost done: the client connects over TCP only after its own side completed. So is one
  // filed before its client's connect() chose the port (unnamed, socket_ops.cc SetUpChannel):
  // the client names it in the WAKEUP it sends as its connect() returns. Both bounded by the
  // providers' set-up limit (5 s) plus a margin.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(6);
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    DropBrokenLocked();
    Look look = LookLocked(listen_fd, tuple);
    if (look.stream) return std::move(look.stream);
    const auto now = std::chrono::steady_clock::now();
    if (!wait || (!look.settling && !look.unnamed)) return nullptr;
    if (now >= deadline) {
      GiveUpLocked(listen_fd, tuple);
      return nullptr;
    }
    if (!look.unnamed) {
      settled_.wait_until(lock, deadline);
    } else if (now - start < std::chrono::nanoseconds(ControlService::kClaimSpinNs)) {
      // Normally a matter of microseconds: the client's connect() has returned or is returning.
      lock.unlock();
      sched_yield();
      lock.lock();
    } else {
      settled_.wait_for(lock, pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
    }
  }
}

void ConnectionThread::NameUnnamedLocked() {
  const uint64_t now = NowNs();
  given_up_.erase(std::remove_if(given_up_.begin(), given_up_.end(),
                                 [now](const GivenUp& g) { return now - g.at_ns > kGivenUpNs; }),
                  given_up_.end());
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    ++i;
    if (p.settling || p.late || PortOf(p.tuple.client) != 0) continue;
    const uint16_t port = p.stream->PeerSourcePort();
    if (port == 0) continue;
    PortField(p.tuple.client) = htons(port);
    const bool given_up = std::any_of(given_up_.begin(), given_up_.end(), [&](const GivenUp& g) {
      return proto::SameAddress(g.tuple.client, p.tuple.client) &&
             proto::SameAddress(g.tuple.server, p.tuple.server);
    });
    if (given_up) {
      SAN_LOG_WARN(
          "rendezvous: a client named its connection (port %u) after accept() had "
          "taken it for kernel TCP; its channel is aborted",
          port);
      p.stream->Abort();
      --i;
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

void ConnectionThread::RememberGivenUpLocked(const proto::FourTuple& tuple) {
  if (given_up_.size() >= kMaxGivenUp) given_up_.erase(given_up_.begin());
  given_up_.push_back(GivenUp{tuple, NowNs()});
}

bool ConnectionThread::InsertLateLocked(const LateDue& d) {
  // Mostly appended (now + the same delay each time); a retry or a drive goes in its place.
  auto at = late_.end();
  while (at != late_.begin() && (at - 1)->due_ns > d.due_ns) --at;
  // Compared after the insert: begin() taken before it may point into the vector's old storage.
  const auto inserted = late_.insert(at, d);
  return inserted == late_.begin();
}

ConnectionThread::LateDue ConnectionThread::DriveDue(int fd, uint64_t socket_id) {
  return LateDue{fd, socket_id, NowNs() + kDriveAfterNs, kDriveTries};
}

void ConnectionThread::Schedule(const LateDue& d, bool start) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || (start && !StartThreadLocked().ok())) return;
    first = InsertLateLocked(d);
    if (!running_) {
      // Kept for a thread started when one is due while the process waits (StartIfLateDue),
      // or now if the process holds many.
      if (late_.size() > kMaxUnservedLate && !StartThreadLocked().ok()) late_.clear();
      NoteUnservedLocked();
      if (!running_) return;
    }
  }
  // Asleep for longer than this one's delay only if it is the first due.
  if (first) eventfd_write(control_.get(), 1);
}

void ConnectionThread::ScheduleLate(int fd, uint64_t socket_id, uint64_t due_ns) {
  Schedule(LateDue{fd, socket_id, due_ns}, false);
}

void ConnectionThread::ScheduleDrive(int fd, uint64_t socket_id) {
  // Started if need be (a fork child's starts at its first new socket): a move under way that
  // nobody drives leaves the peer waiting for our WAKEUP.
  Schedule(DriveDue(fd, socket_id), true);
}

void ConnectionThread::WatchOwner(int listen_fd, uint64_t socket_id, int owner_pid) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const OwnerWatch& w : watches_) {
      if (w.socket_id == socket_id && w.owner == owner_pid) return;  // since an earlier fork
    }
  }
  // ESRCH: gone since the caller looked: taken over at the thread's first pass. Another failure (no
  // pidfds before Linux 5.3, no fds): no watch; the next accept() on the socket looks for the owner
  // (CheckRendezvousOwner).
  UniqueFd pidfd(PlaceLow(static_cast<int>(Syscall(SYS_pidfd_open, owner_pid, 0))));
  if (!pidfd.valid() && errno != ESRCH) {
    SAN_LOG_DEBUG("fd %d: cannot watch the SAN rendezvous owner %d: pidfd_open: %s", listen_fd,
                  owner_pid, strerror(errno));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !StartThreadLocked().ok()) return;
    watches_.push_back(OwnerWatch{listen_fd, socket_id, owner_pid, std::move(pidfd)});
  }
  eventfd_write(control_.get(), 1);
}

void ConnectionThread::TakeOverFromGone(const std::vector<OwnerWatch>& gone) {
  auto pin = table_.Pin();  // a close() deletes sockets only outside it
  for (const OwnerWatch& w : gone) {
    SanSocket* s = table_.Find(w.listen_fd);
    if (s && s->id == w.socket_id) TakeOverFrom(*s, w.listen_fd, w.owner);
  }
}

void ConnectionThread::RunDueLateLocked(std::unique_lock<std::mutex>& lock) {
  const uint64_t now = NowNs();
  size_t due = 0;
  while (due < late_.size() && late_[due].due_ns <= now) ++due;
  if (due == 0) return;
  std::vector<LateDue> batch(late_.begin(), late_.begin() + static_cast<std::ptrdiff_t>(due));
  late_.erase(late_.begin(), late_.begin() + static_cast<std::ptrdiff_t>(due));
  lock.unlock();
  std::vector<LateDue> again;
  {
    auto pin = table_.Pin();  // a close() deletes sockets only outside it
    for (const LateDue& d : batch) {
      SanSocket* s = table_.Find(d.fd);
      if (!s || s->id != d.socket_id || !LatePending(*s)) continue;
      if (d.drives == 0) {
        LowerEndDue(*s);
      } else if (DriveLateSide(*s) && d.drives > 1) {
        again.push_back(LateDue{d.fd, d.socket_id, NowNs() + kDriveEveryNs, d.drives - 1});
      }
    }
  }
  lock.lock();
  for (const LateDue& d : again) InsertLateLocked(d);
}

size_t ConnectionThread::late_listener_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return late_served_.size();
}

size_t ConnectionThread::pending_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

void ConnectionThread::QuiesceForFork() {
  // Bounded: a fork must never wait on us for long (a step is microseconds; a step stuck on a
  // lock the forking program holds would otherwise deadlock it). Past the bound we fork anyway.
  // try_lock in a loop, not timed_mutex::try_lock_for: glibc implements that with
  // pthread_mutex_clocklock, which GCC 12's ThreadSanitizer does not see, so TSan took the unlock
  // in AfterForkParent for the unlock of an unlocked mutex and failed every test that forks.
  constexpr auto kQuiesce = std::chrono::milliseconds(100);
  const auto until = std::chrono::steady_clock::now() + kQuiesce;
  while (!(quiesced_ = step_mu_.try_lock()) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void ConnectionThread::AfterForkParent() {
  mu_.unlock();
  if (quiesced_) step_mu_.unlock();
  quiesced_ = false;
}

void ConnectionThread::AfterForkChild() {
  // A fresh lock, whoever held it in the parent: the child has no thread of ours yet.
  new (&step_mu_) std::timed_mutex();
  quiesced_ = false;
  stepping_ready_.store(false, std::memory_order_relaxed);
  // Only the forking thread exists in the child. The parent's thread keeps serving the shared
  // rendezvous sockets; the child must not compete with it for requests.
  running_ = false;
  // The eventfd is the parent's too: a wake-up meant for one process's thread could be taken by
  // the other's. The child's copy is closed; its thread makes its own when it starts
  // (StartThreadLocked), so a child that never needs one (most: they exec or exit) makes none.
  control_.reset();
  service_.Close();  // the parent's name: the child answers under its own pid once it starts
  served_.clear();
  // The parent's epoll instance: closed, never changed (the parent's listeners stay in it, as
  // the parent holds their fds); the child's thread makes its own.
  late_set_.reset();
  late_served_.clear();
  handshakes_.clear();
  for (auto& p : pending_) proto::Stream::ForgetForkCopy(std::move(p.stream));  // the parent's
  // The parent's Claims waiting on it are counted in the child's copy: a fresh one.
  new (&settled_) std::condition_variable();
  pending_.clear();
  late_.clear();
  unserved_due_ns_.store(kNoneDue, std::memory_order_relaxed);
  watches_.clear();  // the parent's owners; the child's own are added after this
  given_up_.clear();
  mu_.unlock();
}

SAN_FORK_PATH void ConnectionThread::AfterForkChildAlone() {
  // The parent's candidates are the parent's to schedule (late_fork.h): not a write otherwise.
  if (!late_.empty()) {
    late_.clear();
    unserved_due_ns_.store(kNoneDue, std::memory_order_relaxed);
  }
}

void ConnectionThread::DropBrokenLocked() {
  // A client that is gone may have finished its whole exchange before accept() (sent, closed,
  // exited): what it posted and its FIN are in our buffers. Keep those for accept(), as the kernel
  // keeps a finished connection in its accept queue; drop only channels with nothing to deliver.
  // Orphans nobody claimed within the grace period are aborted (the kernel resets the connections
  // left in a closed listener's queue too). A late upgrade's broken channel is kept for its
  // socket if it carries the peer's WAKEUP -- the peer switched and then died: without its count
  // the socket would take the peer's wake byte on TCP for data (the chaos test's corrupt echoes,
  // 1 run in 9) -- and dropped if not: its peer gave that attempt up before switching (a connect
  // that timed out), and the socket, claiming it, would wait on a channel nobody uses.
  // Named first: a finished client's channel is kept by its 4-tuple (StillAcceptable), and a
  // channel named too late is aborted here without waiting for a Claim.
  NameUnnamedLocked();
  const uint64_t now = NowNs();
  pending_.erase(
      std::remove_if(pending_.begin(), pending_.end(),
                     [now](Pending& p) {
                       if (p.settling) return false;
                       if (p.late) {
                         return p.stream->endpoint().broken() && !p.stream->PeerTcpBytes();
                       }
                       const bool expired =
                           p.orphaned_ns == Pending::kNeverAcceptable ||
                           (p.orphaned_ns != 0 && now - p.orphaned_ns > kOrphanGraceMs * 1000000);
                       if (expired) {
                         p.stream->Abort();
                         return true;
                       }
                       if (!p.stream->endpoint().broken()) return false;
                       // A client that moved the connection to its kernel socket (an exec
                       // into an image without sanlib; answered when the naming progressed the
                       // stream) left its channel for accept() to finish the move on.
                       if (p.stream->Available() == 0 && !p.stream->GetReadiness().peer_closed &&
                           !p.stream->Moved()) {
                         return true;
                       }
                       return !StillAcceptable(p, now);
                     }),
      pending_.end());
}

bool ConnectionThread::StillAcceptable(Pending& p, uint64_t now) {
  // A finished exchange is kept only while its connection can still be accepted: while the
  // kernel holds it in an accept queue (established, or closed by the client). A process that
  // accepted it and died before claiming the channel (a prefork worker killed) took the
  // connection with it, and nobody will ever claim the channel: it is dropped. Looked at every
  // kAcceptableCheckMs, not at each pass.
  if (now < p.next_acceptable_check_ns) return true;
  p.next_acceptable_check_ns = now + kAcceptableCheckMs * 1000000;
  // (An IPv4 client of a dual-stack listener is found by these unmapped addresses too.)
  Result<TcpSocketFacts> server_end = LookupTcpSocket(p.tuple.server, p.tuple.client);
  if (!server_end.ok()) return server_end.status().code() != ENOENT;  // unknown: kept
  const int state = server_end->state;
  return state == TCP_ESTABLISHED || state == TCP_CLOSE_WAIT || state == TCP_SYN_RECV;
}

void* ConnectionThread::Main(void* self) {
  static_cast<ConnectionThread*>(self)->Run();
  return nullptr;
}

void ConnectionThread::Run() {
  std::vector<pollfd> fds;
  std::vector<const fabric::Listener*> owners;  // identity only: looked up again under the lock
  // Sockets closed behind our back are looked for this often (socket_ops.h: SweepGhosts).
  constexpr uint64_t kGhostSweepNs = 1000000000;
  uint64_t last_sweep_ns = NowNs();
  std::unique_lock<std::timed_mutex> stepping(step_mu_);
  stepping_ready_.store(true, std::memory_order_release);
  Status st = service_.Open();
  if (!st.ok()) SAN_LOG_INFO("control socket unavailable: %s", st.ToString().c_str());
  for (;;) {
    fds.clear();
    owners.clear();
    size_t first_watch = 0;
    size_t watched = 0;
    bool owner_gone = false;
    std::optional<uint64_t> late_due_ns;  // the first late move's due time
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      fds.push_back(pollfd{control_.get(), POLLIN, 0});
      owners.push_back(nullptr);
      fds.push_back(pollfd{service_.fd(), POLLIN, 0});  // -1 (ignored) if it could not open
      owners.push_back(nullptr);
      fds.push_back(pollfd{late_set_.get(), POLLIN, 0});  // -1 (ignored) until the first move
      owners.push_back(nullptr);
      for (const Served& s : served_) {
        if (!s.listener) continue;  // released (ReleaseRendezvous)
        fds.push_back(pollfd{s.listener->fd(), POLLIN, 0});
        owners.push_back(s.listener.get());
      }
      first_watch = fds.size();
      for (const OwnerWatch& w : watches_) {
        fds.push_back(pollfd{w.pidfd.get(), POLLIN, 0});  // -1 (ignored) if gone already
        owners.push_back(nullptr);
        owner_gone |= !w.pidfd.valid();
      }
      watched = watches_.size();
      if (!late_.empty()) late_due_ns = late_.front().due_ns;
    }
    // Handshakes in progress: their doorbells carry the client's last set-up message (verbs: the
    // rdma_cm channel). The 1 s bound below also lets FinishAccept enforce the set-up limit.
    for (proto::Stream* s : handshakes_) {
      fds.push_back(pollfd{s->endpoint().notify_fd(), POLLIN, 0});
      owners.push_back(nullptr);
    }
    // A bounded sleep so broken, unclaimed channels are reaped even when nothing else happens;
    // shorter when a late upgrade is due, but never less than kLateBatchMs then: under a stream of
    // short connections (each one an entry, most closed long before they are due) the thread
    // wakes some 100 times a second, not once per connection, and a move starts at most that much
    // after its delay.
    constexpr uint64_t kLateBatchMs = 10;
    // A kept claim (ControlService) is asked again every millisecond: its channel is named by a
    // WAKEUP that wakes nobody here.
    int timeout_ms = owner_gone ? 0 : service_.has_parked() ? 1 : 1000;
    if (late_due_ns && timeout_ms > 0) {
      const uint64_t now = NowNs();
      const uint64_t due = *late_due_ns;
      timeout_ms =
          std::min(timeout_ms, due <= now ? 0
                                          : static_cast<int>(std::clamp<uint64_t>(
                                                (due - now) / 1000000 + 1, kLateBatchMs, 1000)));
    }
    stepping.unlock();  // a fork may happen while we sleep, not in the middle of a step
    int n = kernel::poll(fds.data(), fds.size(), timeout_ms);  // our own fds only
    stepping.lock();
    if (n < 0 && errno != EINTR) {
      SAN_LOG_ERROR("connection thread: poll: %s", strerror(errno));
      return;
    }
    if (fds[0].revents) {
      eventfd_t v;
      eventfd_read(control_.get(), &v);
    }
    const auto take = [this](const proto::FourTuple& t, int proof_fd, bool last) {
      return ClaimProved(t, proof_fd, last);
    };
    if (fds[1].revents) service_.Serve(table_, take);
    // After the requests (whose WAKEUPs name channels) and before the late moves.
    if (service_.has_parked()) service_.ServeParked(take);
    if (fds[2].revents) ServeLateRequests(fds[2].fd);
    for (size_t i = 3; i < first_watch; ++i) {
      if (fds[i].revents) ServeRequests(owners[i]);
    }
    // Watches are only appended meanwhile (WatchOwner; AfterForkChild runs in another process):
    // the first `watched` are the ones polled.
    std::vector<OwnerWatch> gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t kept = 0;
      for (size_t i = 0; i < watches_.size(); ++i) {
        const bool ended =
            i < watched && (!watches_[i].pidfd.valid() || fds[first_watch + i].revents != 0);
        if (ended) {
          gone.push_back(std::move(watches_[i]));
        } else {
          if (kept != i) watches_[kept] = std::move(watches_[i]);
          ++kept;
        }
      }
      watches_.erase(watches_.begin() + static_cast<std::ptrdiff_t>(kept), watches_.end());
    }
    if (!gone.empty()) TakeOverFromGone(gone);
    AdvanceHandshakes();
    if (const uint64_t now = NowNs(); now - last_sweep_ns >= kGhostSweepNs) {
      last_sweep_ns = now;
      SweepGhosts();
    }
    std::unique_lock<std::mutex> lock(mu_);
    RunDueLateLocked(lock);
    DropBrokenLocked();
  }
}

void ConnectionThread::ServeLateRequests(int set_fd) {
  epoll_event events[64];
  const int n = kernel::epoll_wait(set_fd, events, 64, 0);
  for (int i = 0; i < n; ++i) ServeRequests(nullptr, events[i].data.fd);
}

void ConnectionThread::ServeRequests(const fabric::Listener* which, int late_token) {
  for (;;) {
    std::unique_ptr<fabric::Endpoint> endpoint;
    uint32_t caps = 0;
    proto::StreamParams params;
    sockaddr_storage listen_addr{};
    int listen_fd = -1;
    bool late = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // By listener, not by socket: one listening socket may be served by several providers
      // (shm for this host, verbs for others), each with its own rendezvous.
      Served* it = nullptr;
      if (which) {
        auto found = std::find_if(served_.begin(), served_.end(),
                                  [&](const Served& s) { return s.listener.get() == which; });
        if (found != served_.end()) it = &*found;
      } else if (auto found = late_served_.find(late_token); found != late_served_.end()) {
        it = &found->second;
      }
      if (!it) return;  // the listener closed meanwhile
      listen_fd = it->listen_fd;
      Result<std::unique_ptr<fabric::Endpoint>> r = it->listener->GetRequest();
      if (!r.ok()) {
        if (!r.status().would_block()) {
          SAN_LOG_WARN("rendezvous on fd %d: %s", listen_fd, r.status().ToString().c_str());
        }
        return;
      }
      endpoint = std::move(r).value();
      caps = it->caps;
      params = it->params;
      listen_addr = it->addr;
      late = it->late;
    }
    Result<proto::FourTuple> tuple = proto::DecodeConnectRequest(endpoint->peer_data());
    if (!tuple.ok() || (!late && PortOf(tuple->server) != PortOf(listen_addr))) {
      SAN_LOG_WARN("rendezvous on fd %d: malformed or misdirected request", listen_fd);
      endpoint->Reject(ECONNREFUSED);
      continue;
    }
    if (late) {
      // Any user's request is taken here (ListenProved): it must prove that it comes from the
      // other end of the very connection it names.
      UniqueFd proof = endpoint->TakeProof();
      if (!proof.valid() || !HoldsConnection(proof.get(), tuple->client, tuple->server)) {
        SAN_LOG_INFO("private rendezvous: a request without proof of its connection, refused");
        endpoint->Reject(ECONNREFUSED);
        continue;
      }
    }
    if (std::string why; !ChannelFitsFdBudget(&why)) {
      // The client stays kernel TCP and says why (EDQUOT: socket_ops.cc Connect).
      SAN_LOG_INFO("rendezvous on fd %d: request refused: %s", listen_fd, why.c_str());
      endpoint->Reject(EDQUOT);
      continue;
    }
    Result<std::unique_ptr<proto::Stream>> stream =
        proto::Stream::Create(std::move(endpoint), caps, params);
    if (!stream.ok()) {
      // The endpoint went with the failed Create; an endpoint destroyed unaccepted is a refusal.
      SAN_LOG_WARN("rendezvous: stream set-up: %s", stream.status().ToString().c_str());
      continue;
    }
    proto::Stream* s = stream->get();
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t mine = std::count_if(pending_.begin(), pending_.end(),
                                  [&](const Pending& p) { return p.listen_fd == listen_fd; });
      auto served = std::find_if(served_.begin(), served_.end(),
                                 [&](const Served& v) { return v.listen_fd == listen_fd; });
      // A late listener closed meanwhile (CloseLateListener) took its last channel already: a
      // client accepted now would switch to a channel nobody claims.
      if (mine >= kMaxPendingPerListener || (late && late_served_.count(listen_fd) == 0)) {
        s->endpoint().Reject(ECONNREFUSED);
        continue;
      }
      // Filed before Accept: once the client hears "accepted" it may connect over TCP at once
      // (a Claim meanwhile waits for `settling` to clear).
      const SocketId id = served != served_.end() ? served->id : SocketId{};
      pending_.push_back(Pending{listen_fd, id, tuple.value(), std::move(stream).value(), true});
      pending_.back().late = late;
    }
    // Outside the lock, and without waiting: a verbs handshake needs a round trip for the
    // client's RTU, which AdvanceHandshakes picks up when the endpoint's notify_fd wakes us.
    Status st = s->endpoint().BeginAccept();
    if (st.ok()) {
      handshakes_.push_back(s);
    } else {
      Settle(s, st);
    }
  }
}

void ConnectionThread::AdvanceHandshakes() {
  for (size_t i = 0; i < handshakes_.size();) {
    proto::Stream* s = handshakes_[i];
    Result<bool> done = s->endpoint().FinishAccept();
    if (done.ok() && !done.value()) {
      ++i;
      continue;
    }
    handshakes_.erase(handshakes_.begin() + static_cast<std::ptrdiff_t>(i));
    Settle(s, done.ok() ? Status::Ok() : done.status());
  }
}

void ConnectionThread::Settle(proto::Stream* s, Status st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Pending& p) { return p.stream.get() == s; });
    // A late channel's WAKEUP is the socket's to send, when it switches (late_upgrade.h). If the
    // application has not switched it kDriveAfterNs from now, this thread does (DriveLateSide).
    if (st.ok() && it != pending_.end() && !it->late) st = s->Start();
    if (st.ok() && it != pending_.end() && it->late) {
      if (auto v = late_served_.find(it->listen_fd); v != late_served_.end()) {
        InsertLateLocked(DriveDue(v->second.late_fd, v->second.late_socket_id));
      }
    }
    if (it != pending_.end()) {  // always: only this thread removes a settling entry
      it->settling = false;
      const bool served = std::any_of(served_.begin(), served_.end(), [&](const Served& v) {
        return v.listen_fd == it->listen_fd;
      });
      if (!st.ok()) {
        SAN_LOG_INFO("rendezvous: accept: %s", st.ToString().c_str());
        it->stream->Abort();
        pending_.erase(it);
      } else if (!served && !it->late) {
        // Its listening socket closed here meanwhile: claimable by another holder for a while.
        // (A late one stays under its token: CloseLateListener waits for it.)
        it->listen_fd = -1;
        if (it->orphaned_ns == 0) it->orphaned_ns = NowNs();
      }
    }
  }
  settled_.notify_all();
}

}  // namespace san
