#include "sanlib/socket/epoll_set.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <optional>
#include <shared_mutex>

#include "sanlib/common/clock.h"
#include "sanlib/common/fd_index.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/socket/late_kick.h"
#include "sanlib/socket/late_phase.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"
#include "sanlib/socket/spin_then_sleep.h"

namespace san {
namespace {

// Kernel-side events are fetched (a syscall) only every this many spins while waiting.
constexpr int kKernelCheckEvery = 32;
// What the last sleep of a Wait saw of the kernel's side of the set (its ppoll watches epfd).
enum class KernelSetSeen { kUnknown, kQuiet, kReady };

// Whether a round of Wait fetches the set's kernel events (a syscall). Right after a sleep, as
// its ppoll saw `epfd`: quiet, not (epoll_wait may report fewer than are ready; the next call
// sees them); ready or timed out, yes. Otherwise always beside members' events (a set whose SAN
// members are always ready still reports its kernel fds), and with none only on a call that ends
// now or spins, every kKernelCheckEvery-th round: a call about to sleep leaves the kernel's side
// to the sleep's ppoll, one syscall fewer per wake-up.
bool LookAtKernel(int found, int round, bool ends_or_spins, KernelSetSeen seen) {
  if (seen != KernelSetSeen::kUnknown) return seen == KernelSetSeen::kReady;
  if (found > 0) return true;
  return ends_or_spins && round % kKernelCheckEvery == 0;
}

// What EPOLLEXCLUSIVE may be combined with (the kernel's EPOLLEXCLUSIVE_OK_BITS).
constexpr uint32_t kExclusiveOk =
    EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;
// The readiness bits a member can ask for (the rest are flags).
constexpr uint32_t kEventBits = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLRDNORM |
                                EPOLLRDBAND | EPOLLWRNORM | EPOLLWRBAND | EPOLLMSG;

// Sets by epoll fd; a set outlives its fd while a thread still waits on it.
struct Registry {
  FdIndex<EpollSet> sets;
  std::shared_mutex lifetime;
};
Registry& Sets() {
  static Registry* registry = new Registry();  // never destroyed (a preloaded library)
  return *registry;
}

int Fail(int err) {
  errno = err;
  return -1;
}

// epoll_ctl's checks of its op and event, which the kernel makes before anything else: 0, or the
// errno.
int ArgumentError(int op, const epoll_event* event) {
  if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL) return EINVAL;
  if (op != EPOLL_CTL_DEL && !event) return EFAULT;
  return 0;
}

// The kernel's EPOLLEXCLUSIVE rules for an op with an event: only on ADD, only with kExclusiveOk.
bool ExclusiveMisused(int op, const epoll_event& event) {
  return (event.events & EPOLLEXCLUSIVE) && (op == EPOLL_CTL_MOD || (event.events & ~kExclusiveOk));
}

SocketTable& Table() { return Runtime::Get().table(); }

// Threads of this process asleep in the kernel's epoll_wait through KernelWait (on any set). An
// epoll_ctl that adds or changes a SAN member kicks the kernel instance only when there may be one
// (the kick is a syscall, and event loops call epoll_ctl on nearly every request). Dekker-style
// with EpollSet::size_: KernelWait counts itself, then looks for members; Control publishes the
// member, then looks at the count (all seq_cst), so one of them sees the other.
std::atomic<int> kernel_sleepers{0};

// Forks this process made since the first epoll instance it created (RegistrationsAreOursLocked).
std::atomic<uint64_t> forks_made{0};
void CountForks() {
  static const bool installed =
      pthread_atfork([] { forks_made.fetch_add(1); }, nullptr, nullptr) == 0;
  (void)installed;
}

}  // namespace

EpollSet* EpollSet::Find(int epfd, bool create) {
  Registry& r = Sets();
  EpollSet* set = r.sets.Find(epfd);
  if (set || !create) return set;
  auto* fresh = new EpollSet();
  if (r.sets.Insert(epfd, fresh)) return fresh;
  delete fresh;  // out of range, or another thread made it first
  return r.sets.Find(epfd);
}

namespace {
// The data of our kick events: distinct from any fd, and a pointer no program hands epoll.
constexpr uint64_t kKickMarker = 0x53414e4b49434b21ull;  // "SANKICK!"
}  // namespace

// inner_'s events: a member's socket id and which of its fds.
enum WatchKind : uint64_t { kBell = 0, kTcp = 1 };
uint64_t WatchKey(uint64_t socket_id, WatchKind kind) { return socket_id << 1 | kind; }

EpollSet::~EpollSet() {
  if (kick_ >= 0) kernel::close(kick_);  // the kernel drops it from the instance
  if (inner_ >= 0) kernel::close(inner_);
}

bool EpollSet::WatchLocked(Member* const* members, const bool* watch_tcp, size_t count) {
  if (inner_ < 0) {
    if (inner_pid_ != 0) return false;  // made and lost, or failed: the old way from now on
    inner_pid_ = ThisPid();
    inner_ = PlaceHigh(kernel::epoll_create1(EPOLL_CLOEXEC));
    if (inner_ < 0) return false;
  }
  if (inner_pid_ != ThisPid()) return false;  // a fork child: the instance is the parent's too
  auto watch = [&](int fd, uint64_t key, uint32_t events) {
    epoll_event ev{};
    ev.events = events | EPOLLET;
    ev.data.u64 = key;
    if (kernel::epoll_ctl(inner_, EPOLL_CTL_ADD, fd, &ev) == 0) return true;
    return errno == EEXIST && kernel::epoll_ctl(inner_, EPOLL_CTL_MOD, fd, &ev) == 0;
  };
  for (size_t i = 0; i < count; ++i) {
    Member& m = *members[i];
    const int bell = m.socket->stream->endpoint().notify_fd();
    if (m.bell_fd != bell) {
      if (bell < 0 || !watch(bell, WatchKey(m.socket_id, kBell), EPOLLIN)) return false;
      m.bell_fd = bell;
    }
    if (watch_tcp[i] == m.tcp_watched) continue;
    if (watch_tcp[i]) {
      if (!watch(m.fd, WatchKey(m.socket_id, kTcp), EPOLLIN | EPOLLRDHUP)) return false;
    } else {
      epoll_event unused{};
      kernel::epoll_ctl(inner_, EPOLL_CTL_DEL, m.fd, &unused);
    }
    m.tcp_watched = watch_tcp[i];
  }
  return true;
}

void EpollSet::UnwatchLocked(Member& m) {
  if (inner_ >= 0 && inner_pid_ == ThisPid()) {
    epoll_event unused{};
    if (m.bell_fd >= 0) kernel::epoll_ctl(inner_, EPOLL_CTL_DEL, m.bell_fd, &unused);
    if (m.tcp_watched) kernel::epoll_ctl(inner_, EPOLL_CTL_DEL, m.fd, &unused);
  }
  m.bell_fd = -1;
  m.tcp_watched = false;
}

void EpollSet::DrainInnerLocked(std::vector<uint64_t>* bells, std::vector<uint64_t>* tcps) {
  if (inner_ < 0) return;
  constexpr int kBatch = 64;
  epoll_event got[kBatch];
  for (;;) {
    const int n = kernel::epoll_wait(inner_, got, kBatch, 0);
    for (int i = 0; i < n; ++i) {
      (got[i].data.u64 & 1 ? tcps : bells)->push_back(got[i].data.u64 >> 1);
    }
    if (n < kBatch) return;
  }
}

void EpollSet::WakeWaitersLocked(int epfd) {
  sleepers_.Wake();
  if (kernel_sleepers.load(std::memory_order_seq_cst) == 0) return;
  if (!kick_tried_) {
    kick_tried_ = true;
    const int fd = PlaceHigh(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;  // every write is a new edge: no need to ever read it
    ev.data.u64 = kKickMarker;
    if (fd >= 0 && kernel::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0) {
      kick_ = fd;
    } else if (fd >= 0) {
      kernel::close(fd);
    }
  }
  if (kick_ >= 0) eventfd_write(kick_, 1);
}

int EpollSet::DropKicks(epoll_event* events, int n) {
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (events[i].data.u64 != kKickMarker) events[kept++] = events[i];
  }
  return kept;
}

bool EpollSet::KernelEventsSuffice(int epfd) {
  EpollSet* set = Sets().sets.Find(epfd);
  return !set || LateQuiet(set->seen_generation_.load());
}

bool EpollSet::KernelCanWait(int epfd) {
  EpollSet* set = Sets().sets.Find(epfd);  // a racing Forget only makes this answer stale
  return !set || set->size_.load(std::memory_order_seq_cst) == 0 ||
         (set->san_size_.load(std::memory_order_seq_cst) == 0 &&
          LateQuiet(set->seen_generation_.load()));
}

int EpollSet::SettleKernelEvents(int epfd, epoll_event* events, int n) {
  if (n <= 0 || !HasMembersThatMayMove(epfd) || KernelEventsSuffice(epfd)) return n;
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  EpollSet* set = Find(epfd, false);
  if (!set) return n;
  auto pin = Table().Pin();
  // The member each event belongs to, matched by the data the program registered: an event whose
  // data more than one pending member shares is left as the kernel said.
  struct Candidate {
    int event;
    SanSocket* socket;
    uint32_t interest;
  };
  std::vector<Candidate> candidates;
  {
    std::lock_guard<std::mutex> lock(set->mu_);
    for (int i = 0; i < n; ++i) {
      const Member* found = set->PendingWithDataLocked(events[i].data.u64, n);
      if (!found) continue;
      const Member& m = *found;
      if (Table().Find(m.fd) != m.socket || m.socket->id != m.socket_id ||
          !SanlibCarries(*m.socket)) {
        continue;
      }
      candidates.push_back(Candidate{i, m.socket, m.events});
    }
  }
  if (candidates.empty()) return n;
  // The steps run with no set lock held (a switch makes system calls); the pin keeps the sockets.
  bool moved = false;
  for (const Candidate& c : candidates) {
    SanSocket& s = *c.socket;
    const bool shm =
        (events[c.event].events & EPOLLIN) ? SettleReadable(s) : s.mode.load() == SocketMode::kShm;
    if (!shm) continue;
    moved = true;
    events[c.event].events =
        static_cast<uint16_t>(SocketRevents(s, static_cast<short>(c.interest & kEventBits)));
  }
  if (!moved) return n;
  std::lock_guard<std::mutex> lock(set->mu_);
  set->RefreshLocked(epfd);  // the moved ones are SAN members now, their kernel registration gone
  for (const Candidate& c : candidates) {
    const uint32_t reported = events[c.event].events;
    Member* m = set->FindLocked(c.socket->fd);
    if (!reported || !m || m->pending || m->socket != c.socket) continue;
    // What the program is told now counts as reported, as CollectLocked would count it.
    if (m->events & EPOLLONESHOT) m->disabled = true;
    m->reported = true;
    m->last_mask = reported;
    m->last_packets = c.socket->stream->Stats().packets_received;
    m->last_drained = c.socket->reads_drained.load(std::memory_order_relaxed);
  }
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (events[i].events) events[kept++] = events[i];
  }
  return kept;
}

bool EpollSet::MustNapOnCandidates(int epfd, std::optional<late_kick::Sleeper>* kickable) {
  // The kick and the count before the look at LateQuiet (late_kick.h: no kick is lost).
  if (WatchLateKick(epfd)) kickable->emplace();
  return !*kickable || !KernelEventsSuffice(epfd);
}

bool EpollSet::WatchLateKick(int epfd) {
  const int kick = late_kick::Fd();
  if (kick < 0) return false;
  // By process and number: a fork child's own kick may get the number its parent's had.
  const uint64_t mine = uint64_t{static_cast<uint32_t>(ThisPid())} << 32 | uint32_t(kick);
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  EpollSet* set = Find(epfd, false);
  if (!set) return false;
  if (set->late_kick_.load(std::memory_order_acquire) == mine) return true;
  std::lock_guard<std::mutex> lock(set->mu_);
  if (set->late_kick_.load() == mine) return true;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;  // every write is a new edge: nobody ever reads it
  ev.data.u64 = kKickMarker;
  if (kernel::epoll_ctl(epfd, EPOLL_CTL_ADD, kick, &ev) != 0 && errno != EEXIST) return false;
  set->late_kick_.store(mine, std::memory_order_release);
  return true;
}

int EpollSet::KernelWait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                         const sigset_t* sigmask, KernelEpollWaits kernel_waits) {
  // The common case -- kernel fds only, no candidate, no kick -- reads no clock: the interposition
  // adds nothing but the lookup that brought us here. The budget starts at the first sleep on
  // candidates, or at the first kick (SAN members arrived while we slept in the kernel), so a
  // kicked call lasts longer than asked only by the time it took to come to the kernel.
  std::optional<WaitBudget> budget;
  int left = timeout_ms;
  for (;;) {
    kernel_sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (HasSanMembers(epfd)) {  // one came meanwhile: its epoll_ctl may not have kicked
      kernel_sleepers.fetch_sub(1, std::memory_order_seq_cst);
      return Wait(epfd, events, max_events, left, sigmask, kernel_waits);
    }
    // A member that may still move to shm (a late upgrade: socket/late_upgrade.h) can do so in
    // another thread's call while we sleep here, after which its kernel registration may never
    // fire again (the peer's wake byte read, or its edge reported already). While no move of the
    // process is under way, and none ended since the set last looked, the kernel's events are the
    // whole truth and the kick ends the sleep when that changes (late_kick.h): the whole time,
    // or until a candidate queued for a connection thread not started yet falls due. Otherwise,
    // or with no kick, naps, and a look at the set after each (RefreshLocked makes a moved member
    // a SAN one).
    const bool may_move = HasMembersThatMayMove(epfd);
    std::optional<late_kick::Sleeper> kickable;
    int nap = left;
    if (may_move) {
      ConnectionThread& connections = Runtime::Get().connections();
      connections.StartIfLateDue();
      if (!budget && left > 0) budget.emplace(timeout_ms);
      nap = SoonerMs(
          left, MustNapOnCandidates(epfd, &kickable) ? kLateNapMs : connections.MsUntilLateDue());
    }
    const int n = kernel_waits.pwait(epfd, events, max_events, nap, sigmask);
    kickable.reset();
    kernel_sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (n < 0 || (n == 0 && nap == left)) return n;
    const int kept = n > 0 ? SettleKernelEvents(epfd, events, DropKicks(events, n)) : 0;
    if (kept > 0) return kept;
    // Looked at again only if a move is under way, or one ended or a socket settled since the
    // last look: an idle server's 1,000 idle candidates were all looked at every nap, half of
    // what it spent idle. (Members closed since are dropped at the next look.)
    if (may_move && !KernelEventsSuffice(epfd)) Refresh(epfd);
    if (HasSanMembers(epfd)) return Wait(epfd, events, max_events, left, sigmask, kernel_waits);
    if (!budget) budget.emplace(timeout_ms);
    left = budget->remaining_ms();
    if (left == 0) return 0;
  }
}

void EpollSet::Refresh(int epfd) {
  Registry& r = Sets();
  std::shared_lock<std::shared_mutex> reg(r.lifetime);
  if (EpollSet* set = Find(epfd, false)) {
    auto pin = Table().Pin();
    std::lock_guard<std::mutex> lock(set->mu_);
    set->RefreshLocked(epfd);
  }
}

void EpollSet::Created(int epfd) {
  Forget(epfd);  // a set left for the number by an epoll fd closed without san_close
  CountForks();
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  if (EpollSet* set = Find(epfd, true)) {
    std::lock_guard<std::mutex> lock(set->mu_);
    set->private_pid_ = ThisPid();
    set->private_forks_ = forks_made.load();
  }
}

bool EpollSet::RegistrationsAreOursLocked() const {
  return private_pid_ != 0 && private_pid_ == ThisPid() && forks_made.load() == private_forks_;
}

void EpollSet::Forget(int epfd) {
  Registry& r = Sets();
  // A vfork child closes its own copy of the set: the set is its parent's (runtime.h).
  if (!r.sets.Find(epfd) || Runtime::InVforkChild()) return;
  std::unique_lock<std::shared_mutex> lock(r.lifetime);
  delete r.sets.Remove(epfd);
}

const EpollSet::Member* EpollSet::PendingWithDataLocked(uint64_t data, int lookups) {
  // A few events against a set that changed since the index was built (a stream of short
  // connections changes it at every accept and close): a scan costs less than rebuilding and
  // sorting the index each time.
  if (pending_index_dirty_ &&
      static_cast<size_t>(lookups) * members_.size() <= kScanInsteadOfIndex) {
    const Member* found = nullptr;
    for (const Member& m : members_) {
      if (!m.pending || m.data.u64 != data) continue;
      if (found) return nullptr;  // shared data
      found = &m;
    }
    return found;
  }
  const std::vector<std::pair<uint64_t, size_t>>& by_data = PendingByDataLocked();
  auto at = std::lower_bound(by_data.begin(), by_data.end(), data,
                             [](const auto& e, uint64_t k) { return e.first < k; });
  if (at == by_data.end() || at->first != data) return nullptr;
  if (at + 1 != by_data.end() && (at + 1)->first == data) return nullptr;  // shared data
  return &members_[at->second];
}

const std::vector<std::pair<uint64_t, size_t>>& EpollSet::PendingByDataLocked() {
  if (pending_index_dirty_) {
    pending_by_data_.clear();
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].pending) pending_by_data_.emplace_back(members_[i].data.u64, i);
    }
    std::sort(pending_by_data_.begin(), pending_by_data_.end());
    pending_index_dirty_ = false;
  }
  return pending_by_data_;
}

void EpollSet::PublishSizesLocked() {
  if (!sizes_dirty_) return;
  sizes_dirty_ = false;
  san_size_.store(static_cast<size_t>(std::count_if(members_.begin(), members_.end(),
                                                    [](const Member& m) { return !m.pending; })),
                  std::memory_order_seq_cst);
  size_.store(members_.size(), std::memory_order_seq_cst);
}

bool EpollSet::HasSanMembers(int epfd) {
  EpollSet* set = Sets().sets.Find(epfd);
  return set && set->san_size_.load(std::memory_order_seq_cst) > 0;
}

bool EpollSet::HasMembersThatMayMove(int epfd) {
  // The kernel's registrations that RefreshLocked keeps: sockets not settled yet, and late
  // upgrade candidates (settled TCP sockets and listeners are dropped from members_).
  EpollSet* set = Sets().sets.Find(epfd);
  return set && set->size_.load(std::memory_order_seq_cst) >
                    set->san_size_.load(std::memory_order_seq_cst);
}

bool EpollSet::Involved(int epfd) {
  EpollSet* set = Sets().sets.Find(epfd);  // a racing Forget only makes this answer stale
  return set && set->size_.load(std::memory_order_seq_cst) > 0;
}

void EpollSet::DropFd(int epfd, int fd) {
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  if (EpollSet* set = Find(epfd, false)) {
    std::lock_guard<std::mutex> lock(set->mu_);
    set->DropFdLocked(fd, false);  // fd names something else now: never unregister by number
  }
}

bool EpollSet::HandBackLocked(int epfd, Member& m) {
  if (m.disabled) return false;
  epoll_event ev{};
  ev.events = m.events;
  ev.data = m.data;
  // EEXIST: a fork relative sharing the instance handed it over first.
  if (kernel::epoll_ctl(epfd, EPOLL_CTL_ADD, m.fd, &ev) != 0 && errno != EEXIST) {
    refresh_due_ = true;  // tried again at the next look (ENOMEM, max_user_watches)
    return false;
  }
  UnwatchLocked(m);
  return true;
}

int EpollSet::ControlKernelSocket(int epfd, int op, int fd, SanSocket& s, epoll_event* event) {
  {
    std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
    if (EpollSet* set = Find(epfd, false)) {
      std::lock_guard<std::mutex> lock(set->mu_);
      Member* m = set->FindLocked(fd);
      if (m && !m->pending && m->socket == &s && m->socket_id == s.id) {
        if (const int err = ArgumentError(op, event)) return Fail(err);
        return set->ControlHandedBackLocked(epfd, op, *m, event);
      }
      // A stale member (its socket closed, the number reused), or a pending one: the kernel
      // holds the registration, if any.
      set->DropFdLocked(fd, false);
    }
  }
  return kernel::epoll_ctl(epfd, op, fd, event);
}

int EpollSet::ControlHandedBackLocked(int epfd, int op, Member& m, epoll_event* event) {
  const int fd = m.fd;
  // The kernel's order of checks: the event (ArgumentError, made by the callers), EPOLLEXCLUSIVE's
  // rules, then the registration.
  if (op != EPOLL_CTL_DEL && ExclusiveMisused(op, *event)) return Fail(EINVAL);
  if (op == EPOLL_CTL_ADD) return Fail(EEXIST);
  if (op == EPOLL_CTL_MOD && (m.events & EPOLLEXCLUSIVE)) return Fail(EINVAL);
  if (op == EPOLL_CTL_DEL) {
    DropFdLocked(fd, true);
    epoll_event unused{};
    kernel::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &unused);  // one a fork relative handed over
    return 0;
  }
  // Registered in the kernel first: if that fails, the member stays (a failed MOD keeps the old
  // registration, as the kernel's does). EEXIST: a fork relative sharing the instance handed it
  // over first, and this MOD changes that registration.
  if (kernel::epoll_ctl(epfd, EPOLL_CTL_ADD, fd, event) != 0 &&
      (errno != EEXIST || kernel::epoll_ctl(epfd, EPOLL_CTL_MOD, fd, event) != 0)) {
    return -1;
  }
  DropFdLocked(fd, true);
  return 0;
}

EpollSet::Member* EpollSet::FindLocked(int fd) {
  if (fd_index_dirty_) {
    std::fill(fd_index_.begin(), fd_index_.end(), 0u);
    for (size_t i = 0; i < members_.size(); ++i) IndexLocked(members_[i].fd, i);
    fd_index_dirty_ = false;
  }
  const size_t f = static_cast<size_t>(fd);
  if (fd < 0 || f >= fd_index_.size() || fd_index_[f] == 0) return nullptr;
  return &members_[fd_index_[f] - 1];
}

void EpollSet::IndexLocked(int fd, size_t at) {
  const size_t f = static_cast<size_t>(fd);
  if (f >= fd_index_.size()) fd_index_.resize(std::max(f + 1, fd_index_.size() * 2), 0u);
  fd_index_[f] = static_cast<uint32_t>(at + 1);
}

void EpollSet::AddMemberLocked(Member m) {
  members_.push_back(m);
  CountsChangedLocked();
  // It may have settled already; the refresh will tell.
  refresh_due_ = true;
  if (!fd_index_dirty_) IndexLocked(m.fd, members_.size() - 1);  // the others keep their places
}

void EpollSet::DropFdLocked(int fd, bool live) {
  Member* m = FindLocked(fd);
  if (!m) return;
  if (live) UnwatchLocked(*m);
  // The last member takes its place (the order of members_ means nothing; a scan's fairness
  // comes from next_): the fd index stays current with one update, not a rebuild of the whole
  // map at the next look-up -- under a stream of short connections every close dropped a member,
  // and every epoll_ctl after it rebuilt the index.
  const size_t at = static_cast<size_t>(m - members_.data());
  fd_index_[static_cast<size_t>(fd)] = 0;
  if (at + 1 != members_.size()) {
    members_[at] = members_.back();
    IndexLocked(members_[at].fd, at);
  }
  members_.pop_back();
  CountsChangedLocked();
  PublishSizesLocked();
}

int EpollSet::Control(int epfd, int op, int fd, SanSocket& s, epoll_event* event) {
  if (const int err = ArgumentError(op, event)) return Fail(err);
  if (epfd == fd) return Fail(EINVAL);
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  EpollSet* set = Find(epfd, true);
  // An epoll fd beyond the registry's range: the kernel's registration is the best there is.
  if (!set) return kernel::epoll_ctl(epfd, op, fd, event);
  auto pin = Table().Pin();
  std::lock_guard<std::mutex> lock(set->mu_);
  const int rc = set->ControlLocked(epfd, op, fd, s, event);
  set->PublishSizesLocked();
  // A SAN member they may not watch yet; a pending one's kernel registration wakes them itself.
  if (rc == 0 && op != EPOLL_CTL_DEL) {
    const Member* m = set->FindLocked(fd);
    if (m && !m->pending) set->WakeWaitersLocked(epfd);
  }
  SAN_LOG_DEBUG("epoll_ctl(%d, %d, %d, 0x%x) = %d (%s)", epfd, op, fd, event ? event->events : 0u,
                rc, rc == 0 ? "ok" : strerror(errno));
  return rc;
}

int EpollSet::ControlLocked(int epfd, int op, int fd, SanSocket& s, epoll_event* event) {
  Member* m = FindLocked(fd);
  if (m && (m->socket != &s || m->socket_id != s.id)) {
    DropFdLocked(fd,
                 false);  // a socket closed since: its registration went with it, as in the kernel
    m = nullptr;
  }
  if (m && !m->pending && KernelAlone(s)) {
    // Moved to kernel TCP since the caller looked (another thread's call ended the move).
    return ControlHandedBackLocked(epfd, op, *m, event);
  }
  if (s.mode.load(std::memory_order_acquire) != SocketMode::kShm) {
    // Not connected yet: the kernel's registration serves until it turns out to be SAN.
    if (op == EPOLL_CTL_MOD && m && m->pending && m->events == event->events &&
        m->data.u64 == event->data.u64 &&
        !(event->events & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE)) &&
        RegistrationsAreOursLocked()) {
      return 0;  // what the kernel holds already (level-triggered: nothing to re-arm)
    }
    if (kernel::epoll_ctl(epfd, op, fd, event) != 0) return -1;
    if (op == EPOLL_CTL_ADD) {
      AddMemberLocked(Member{fd, &s, s.id, event->events, event->data, true});
    } else if (m && op == EPOLL_CTL_MOD) {
      m->events = event->events;
      m->data = event->data;
      pending_index_dirty_ = true;  // a pending member's data is its key there
    } else if (m) {
      DropFdLocked(fd, true);
    }
    return 0;
  }
  // The kernel checks the epoll fd (EBADF, EINVAL if not an epoll) and holds no registration of a
  // SAN socket: a pending one it held is dropped here. A settled member's MOD/DEL needs neither
  // (the set is forgotten when its epoll fd closes), which saves event loops a syscall per call.
  if (!m || m->pending) {
    epoll_event unused{};
    if (kernel::epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &unused) != 0 && errno != ENOENT) return -1;
    if (m) {
      m->pending = false;
      CountsChangedLocked();
    }
  }
  if (op != EPOLL_CTL_DEL && ExclusiveMisused(op, *event)) return Fail(EINVAL);
  switch (op) {
    case EPOLL_CTL_ADD:
      if (m) return Fail(EEXIST);
      AddMemberLocked(Member{fd, &s, s.id, event->events, event->data, false});
      return 0;
    case EPOLL_CTL_MOD:
      if (!m) return Fail(ENOENT);
      if (m->events & EPOLLEXCLUSIVE) return Fail(EINVAL);
      m->events = event->events;
      m->data = event->data;
      m->disabled = false;  // MOD re-arms a fired EPOLLONESHOT and re-reports an edge
      m->reported = false;
      m->stamp = ReadinessStamp{};  // its mask was for the events asked before
      return 0;
    default:
      if (!m) return Fail(ENOENT);
      DropFdLocked(fd, true);
      return 0;
  }
}

void EpollSet::RefreshLocked(int epfd) {
  const uint64_t generation = ReadinessGeneration();  // before the look: a change during it counts
  SocketTable& table = Table();
  const uint64_t changes = table.Changes();
  // Nothing closed, settled or moved in the process, and no member joined, since the last look:
  // it would find what it found (a pass over every member, for every epoll_wait of a set with
  // thousands of them).
  if (!refresh_due_ && changes == seen_changes_ && generation == seen_generation_.load()) {
    PublishSizesLocked();  // members may have left or settled through epoll_ctl
    return;
  }
  refresh_due_ = false;
  seen_changes_ = changes;
  const size_t before = members_.size();
  members_.erase(std::remove_if(members_.begin(), members_.end(),
                                [&](Member& m) {
                                  SanSocket* now = table.Find(m.fd);
                                  if (now != m.socket || now->id != m.socket_id)
                                    return true;  // closed
                                  if (!m.pending) {
                                    return KernelAlone(*now) && HandBackLocked(epfd, m);
                                  }
                                  const SocketMode mode = now->mode.load(std::memory_order_acquire);
                                  if (mode == SocketMode::kShm) {
                                    epoll_event unused{};
                                    kernel::epoll_ctl(epfd, EPOLL_CTL_DEL, m.fd, &unused);
                                    m.pending = false;
                                    CountsChangedLocked();
                                    return false;
                                  }
                                  // TCP fallback or a listener: the kernel registration is all it
                                  // needs (unless the connection may still move to shm).
                                  return KernelAlone(*now) || now->listening.load();
                                }),
                 members_.end());
  if (members_.size() != before) MemberLeftLocked();
  PublishSizesLocked();
  seen_generation_.store(generation);
}

void EpollSet::MarkFired(int epfd, int inner, const std::vector<SleepWatch>& watches,
                         std::vector<pollfd>* fds) {
  std::vector<uint64_t> bells, tcps;
  {
    std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
    EpollSet* set = Find(epfd, false);
    if (!set) return;  // closed meanwhile: FinishSleep only ends the watches
    std::lock_guard<std::mutex> lock(set->mu_);
    if (set->inner_ != inner) return;
    set->DrainInnerLocked(&bells, &tcps);
  }
  auto fired = [](const std::vector<uint64_t>& ids, uint64_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  for (const SleepWatch& w : watches) {
    if (fired(bells, w.id)) (*fds)[w.first].revents = POLLIN;
    if (fired(tcps, w.id)) (*fds)[w.first + 2].revents = POLLIN;
  }
}

uint32_t EpollSet::LookLocked(Member& m) {
  if (m.stamp_reuses < kStampReuses && StampHolds(*m.socket, m.stamp)) {
    ++m.stamp_reuses;
    return m.stamp_mask;
  }
  m.stamp_reuses = 0;
  m.stamp_mask = static_cast<uint16_t>(
      SocketRevents(*m.socket, static_cast<short>(m.events & kEventBits), &m.stamp));
  return m.stamp_mask;
}

const std::vector<uint32_t>& EpollSet::SanIndexLocked() {
  if (san_index_dirty_) {
    san_index_dirty_ = false;
    san_index_.clear();
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i].pending) san_index_.push_back(static_cast<uint32_t>(i));
    }
  }
  return san_index_;
}

int EpollSet::CollectLocked(epoll_event* events, int max) {
  const std::vector<uint32_t>& sans = SanIndexLocked();
  const size_t size = sans.size();
  const size_t start = size ? next_ % size : 0;
  int n = 0;
  for (size_t k = 0; k < size && n < max; ++k) {
    const size_t i = (start + k) % size;
    Member& m = members_[sans[i]];
    if (m.disabled) continue;
    const uint32_t mask = LookLocked(m);
    bool report = mask != 0;
    if (m.events & EPOLLET) {
      // The stamp's count is the stream's at the look (the stamp holds: no packet since); a look
      // that made no stamp asks the stream.
      uint64_t packets = m.last_packets;
      if (mask) {
        packets =
            m.stamp.version ? m.stamp.packets_received : m.socket->stream->Stats().packets_received;
      }
      const uint64_t drained = m.socket->reads_drained.load(std::memory_order_relaxed);
      report = mask && (!m.reported || mask != m.last_mask || packets != m.last_packets ||
                        ((mask & EPOLLIN) && drained != m.last_drained));
      m.last_mask = mask;
      if (report) {
        m.reported = true;
        m.last_packets = packets;
        m.last_drained = drained;
      }
    }
    if (!report) continue;
    events[n].events = mask;
    events[n].data = m.data;
    ++n;
    if (m.events & EPOLLONESHOT) m.disabled = true;
    next_ = i + 1;
  }
  return n;
}

int EpollSet::TopUp(int epfd, epoll_event* events, int max) {
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  EpollSet* set = Find(epfd, false);
  if (!set) return 0;
  auto pin = Table().Pin();
  std::lock_guard<std::mutex> lock(set->mu_);
  set->RefreshLocked(epfd);
  return set->CollectLocked(events, max);
}

int EpollSet::Wait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                   const sigset_t* sigmask, KernelEpollWaits kernel_waits) {
  if (max_events <= 0) return Fail(EINVAL);
  Registry& r = Sets();
  const WaitBudget budget(timeout_ms);
  SpinThenSleep engine(Runtime::Get().config(), timeout_ms);
  // What the last sleep's ppoll said of the kernel's side of the set (`epfd` itself).
  KernelSetSeen kernel_seen = KernelSetSeen::kUnknown;
  for (int round = 0;; ++round) {
    int n = 0;
    bool any_san = false;
    // Fairness with the kernel's fds. SAN members are collected first, and a set with more of
    // them ready than `max_events` filled every call with them: the kernel's side (the listener,
    // connections still on TCP) was never asked, and nginx under wrk -c 1000 left new and TCP
    // connections unserved for seconds (wrk timeouts, p99 0.7-1.2 s against TCP's 18 ms). So a
    // call after such a one leaves the kernel at least half the slots (all, if max_events is 1),
    // and fills them with SAN members only if the kernel had nothing (so that a member the kernel
    // reported, pending, and settled since is not reported twice in one call).
    bool kernel_turn = false;
    int san_cap = max_events;
    {
      std::shared_lock<std::shared_mutex> reg(r.lifetime);
      if (EpollSet* set = Find(epfd, false)) {
        auto pin = Table().Pin();
        std::lock_guard<std::mutex> lock(set->mu_);
        set->RefreshLocked(epfd);
        any_san = set->san_size_.load(std::memory_order_relaxed) > 0;  // published by the refresh
        kernel_turn = set->kernel_owed_;
        if (kernel_turn) san_cap = max_events / 2;
        n = set->CollectLocked(events, san_cap);
        set->kernel_owed_ = n == max_events;
      }
    }
    if (!any_san && n == 0) {
      // Only kernel registrations (left): the kernel does it all, with the time that is left.
      return KernelWait(epfd, events, max_events, budget.remaining_ms(), sigmask, kernel_waits);
    }
    const bool spin = n == 0 && timeout_ms != 0 && engine.Spin();
    const int san_found = n;
    if (n < max_events &&
        (kernel_turn || LookAtKernel(n, round, timeout_ms == 0 || spin, kernel_seen))) {
      const int k = kernel::epoll_wait(epfd, events + n, max_events - n, 0);
      if (k < 0 && n == 0) return -1;
      if (k > 0) n += SettleKernelEvents(epfd, events + n, DropKicks(events + n, k));
    }
    if (kernel_turn && n == san_found) n += TopUp(epfd, events + n, max_events - n);
    kernel_seen = KernelSetSeen::kUnknown;
    if (n > 0) {
      engine.Found();
      return n;
    }
    if (timeout_ms == 0) return 0;
    if (spin) continue;
    const int left = budget.remaining_ms();
    if (left == 0) return 0;
    // Sleep until a member's doorbell, a kernel fd of the set, or the timeout; then look again.
    std::vector<pollfd> fds{pollfd{epfd, POLLIN, 0}};
    std::vector<SleepWatch> watches;
    bool ready = false;
    bool new_edge = false;  // sleep for no time: collect again
    int inner = -1;         // the set's own instance, if this sleep uses it
    int set_wake = -1;      // this thread's eventfd, registered with the set (epoll_ctl wakes it)
    int set_slot = -1;
    {
      std::shared_lock<std::shared_mutex> reg(r.lifetime);
      EpollSet* set = Find(epfd, false);
      if (!set) return Fail(EBADF);  // closed by another thread meanwhile
      auto pin = Table().Pin();
      std::lock_guard<std::mutex> lock(set->mu_);
      // Members closed since the collect above are gone from the table (and their streams freed):
      // drop them before arming (gRPC closes fds on one thread while another waits here).
      set->RefreshLocked(epfd);
      std::vector<SanSocket*> sockets;
      std::vector<short> interest;
      // Edge-triggered members: what they last reported is no new edge while it lasts, so it
      // must not end the sleep (an idle writable socket would keep us awake: gRPC registers
      // every fd EPOLLIN|EPOLLOUT|EPOLLET). New data is: the doorbell rings for it, and data
      // reaped since the collect is looked for below.
      std::vector<short> quiet;
      std::vector<const Member*> edges;
      std::vector<Member*> sleeping;
      for (Member& m : set->members_) {
        if (m.pending || m.disabled) continue;
        sleeping.push_back(&m);
        sockets.push_back(m.socket);
        interest.push_back(static_cast<short>(m.events & kEventBits));
        const bool quiet_edge = (m.events & EPOLLET) && m.reported && m.last_mask != 0;
        // Readable is no old edge once the program has read to EAGAIN since the report.
        const uint32_t drained =
            m.socket->reads_drained.load(std::memory_order_relaxed) != m.last_drained
                ? static_cast<uint32_t>(EPOLLIN)
                : 0u;
        quiet.push_back(quiet_edge ? static_cast<short>(m.last_mask & ~drained) : 0);
        if (quiet_edge) edges.push_back(&m);
      }
      ready = ArmForSleep(sockets.data(), interest.data(), sockets.size(), &fds, &watches,
                          quiet.data());
      if (!ready) {
        // Packets reaped while arming (by the re-check) rang no doorbell: if an edge member got
        // any since its last report, that is a new edge to collect, not a reason to sleep.
        for (const Member* m : edges) {
          if (m->socket->stream->Stats().packets_received != m->last_packets) new_edge = true;
        }
      }
      if (!ready) {
        set_wake = ThisThreadWakeFd();
        set_slot = set_wake >= 0 ? set->sleepers_.Add(set_wake) : -1;
        fds.push_back(pollfd{set_slot >= 0 ? set_wake : -1, POLLIN, 0});
        // The members' fds in the set's own instance, unless one moved to TCP (it waits for
        // what its relay needs) or this process cannot use the instance.
        std::vector<uint8_t> watch_tcp(watches.size());
        bool any_moved = false;
        for (size_t i = 0; i < watches.size(); ++i) {
          watch_tcp[i] = watches[i].watch_tcp;
          any_moved = any_moved || watches[i].moved;
        }
        if (!any_moved &&
            set->WatchLocked(sleeping.data(), reinterpret_cast<const bool*>(watch_tcp.data()),
                             sleeping.size())) {
          inner = set->inner_;
        }
      }
    }
    if (ready) {
      round = -1;
      continue;
    }
    // A pending member that may still move to shm may do so in another thread's call while we
    // sleep, its doorbell not armed (a kernel registration until then): as in KernelWait, the late
    // kick ends the sleep (`epfd` turns readable) while no move is under way; otherwise naps.
    std::optional<late_kick::Sleeper> kickable;
    const bool nap = HasMembersThatMayMove(epfd) && MustNapOnCandidates(epfd, &kickable);
    int timeout = new_edge ? 0 : set_slot < 0 && (left < 0 || left > 1) ? 1 : left;
    if (nap) timeout = SoonerMs(timeout, kLateNapMs);
    // One ppoll over three fds however many members (epoll_set.h), else a pollfd per fd.
    pollfd few[3] = {fds.front(), pollfd{inner, POLLIN, 0}, pollfd{set_wake, POLLIN, 0}};
    const bool use_inner = inner >= 0;
    const int rc =
        use_inner ? kernel::ppoll(few, 3, SleepTimeout(watches, timeout), sigmask)
                  : kernel::ppoll(fds.data(), fds.size(), SleepTimeout(watches, timeout), sigmask);
    const int err = errno;
    kickable.reset();
    if (rc <= 0) {
      for (pollfd& p : fds) p.revents = 0;
    } else if (use_inner) {
      // The wake-up eventfd stands for the set's slot and every member's: read it once, here.
      if (few[2].revents) {
        eventfd_t v;
        eventfd_read(set_wake, &v);
      }
      if (few[1].revents) MarkFired(epfd, inner, watches, &fds);
    }
    if (set_slot >= 0) {
      if (fds.back().revents) {
        eventfd_t v;
        eventfd_read(set_wake, &v);
      }
      std::shared_lock<std::shared_mutex> reg(r.lifetime);
      if (EpollSet* set = Find(epfd, false)) set->sleepers_.Remove(set_slot, set_wake);
    }
    {
      auto pin = Table().Pin();
      FinishSleep(watches, fds, &Table());
    }
    if (rc < 0) return Fail(err);
    // A ppoll that ended on a member, `epfd` quiet: the next round leaves the kernel out.
    const bool epfd_ready = (use_inner ? few[0].revents : fds.front().revents) != 0;
    kernel_seen = rc > 0 && !epfd_ready ? KernelSetSeen::kQuiet : KernelSetSeen::kReady;
    round = -1;
  }
}

}  // namespace san
