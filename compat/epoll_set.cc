#include "compat/epoll_set.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <shared_mutex>

#include "common/clock.h"
#include "common/fd_index.h"
#include "common/log.h"
#include "compat/real_calls.h"
#include "socket/kernel.h"
#include "socket/runtime.h"
#include "socket/socket_ops.h"

namespace san::compat {
namespace {

// Kernel-side events are fetched (a syscall) only every this many spins while waiting.
constexpr int kKernelCheckEvery = 32;
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

SocketTable& Table() { return Runtime::Get().table(); }

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

void EpollSet::Forget(int epfd) {
  Registry& r = Sets();
  if (!r.sets.Find(epfd)) return;
  std::unique_lock<std::shared_mutex> lock(r.lifetime);
  delete r.sets.Remove(epfd);
}

bool EpollSet::Involved(int epfd) {
  EpollSet* set = Sets().sets.Find(epfd);  // a racing Forget only makes this answer stale
  return set && set->size_.load(std::memory_order_acquire) > 0;
}

void EpollSet::DropFd(int epfd, int fd) {
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  if (EpollSet* set = Find(epfd, false)) {
    std::lock_guard<std::mutex> lock(set->mu_);
    set->DropFdLocked(fd);
  }
}

EpollSet::Member* EpollSet::FindLocked(int fd) {
  for (Member& m : members_) {
    if (m.fd == fd) return &m;
  }
  return nullptr;
}

void EpollSet::DropFdLocked(int fd) {
  members_.erase(
      std::remove_if(members_.begin(), members_.end(), [&](const Member& m) { return m.fd == fd; }),
      members_.end());
  size_.store(members_.size(), std::memory_order_release);
}

int EpollSet::Control(int epfd, int op, int fd, SanSocket& s, epoll_event* event) {
  if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL) return Fail(EINVAL);
  if (op != EPOLL_CTL_DEL && !event) return Fail(EFAULT);
  if (epfd == fd) return Fail(EINVAL);
  std::shared_lock<std::shared_mutex> reg(Sets().lifetime);
  EpollSet* set = Find(epfd, true);
  // An epoll fd beyond the registry's range: the kernel's registration is the best there is.
  if (!set) return Real().epoll_ctl(epfd, op, fd, event);
  auto pin = Table().Pin();
  std::lock_guard<std::mutex> lock(set->mu_);
  const int rc = set->ControlLocked(epfd, op, fd, s, event);
  set->size_.store(set->members_.size(), std::memory_order_release);
  SAN_LOG_DEBUG("epoll_ctl(%d, %d, %d, 0x%x) = %d (%s)", epfd, op, fd, event ? event->events : 0u,
                rc, rc == 0 ? "ok" : strerror(errno));
  return rc;
}

int EpollSet::ControlLocked(int epfd, int op, int fd, SanSocket& s, epoll_event* event) {
  Member* m = FindLocked(fd);
  if (m && (m->socket != &s || m->socket_id != s.id)) {
    DropFdLocked(fd);  // a socket closed since: its registration went with it, as in the kernel
    m = nullptr;
  }
  if (s.mode.load(std::memory_order_acquire) != SocketMode::kShm) {
    // Not connected yet: the kernel's registration serves until it turns out to be SAN.
    if (Real().epoll_ctl(epfd, op, fd, event) != 0) return -1;
    if (op == EPOLL_CTL_ADD) {
      members_.push_back(Member{fd, &s, s.id, event->events, event->data, true});
    } else if (m && op == EPOLL_CTL_MOD) {
      m->events = event->events;
      m->data = event->data;
    } else if (m) {
      DropFdLocked(fd);
    }
    return 0;
  }
  // The kernel checks the epoll fd (EBADF, EINVAL if not an epoll) and holds no registration of a
  // SAN socket: a pending one it held is dropped here.
  epoll_event unused{};
  if (Real().epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &unused) != 0 && errno != ENOENT) return -1;
  if (m) m->pending = false;
  if (op != EPOLL_CTL_DEL && (event->events & EPOLLEXCLUSIVE)) {
    if (op == EPOLL_CTL_MOD || (event->events & ~kExclusiveOk)) return Fail(EINVAL);
  }
  switch (op) {
    case EPOLL_CTL_ADD:
      if (m) return Fail(EEXIST);
      members_.push_back(Member{fd, &s, s.id, event->events, event->data, false});
      return 0;
    case EPOLL_CTL_MOD:
      if (!m) return Fail(ENOENT);
      if (m->events & EPOLLEXCLUSIVE) return Fail(EINVAL);
      m->events = event->events;
      m->data = event->data;
      m->disabled = false;  // MOD re-arms a fired EPOLLONESHOT and re-reports an edge
      m->reported = false;
      return 0;
    default:
      if (!m) return Fail(ENOENT);
      DropFdLocked(fd);
      return 0;
  }
}

void EpollSet::RefreshLocked(int epfd) {
  SocketTable& table = Table();
  members_.erase(std::remove_if(members_.begin(), members_.end(),
                                [&](Member& m) {
                                  SanSocket* now = table.Find(m.fd);
                                  if (now != m.socket || now->id != m.socket_id)
                                    return true;  // closed
                                  if (!m.pending) return false;
                                  const SocketMode mode = now->mode.load(std::memory_order_acquire);
                                  if (mode == SocketMode::kShm) {
                                    epoll_event unused{};
                                    Real().epoll_ctl(epfd, EPOLL_CTL_DEL, m.fd, &unused);
                                    m.pending = false;
                                    return false;
                                  }
                                  // TCP fallback or a listener: the kernel registration is all it
                                  // needs.
                                  return mode == SocketMode::kTcp || now->listening.load();
                                }),
                 members_.end());
  size_.store(members_.size(), std::memory_order_release);
}

int EpollSet::CollectLocked(epoll_event* events, int max) {
  const size_t size = members_.size();
  const size_t start = size ? next_ % size : 0;
  int n = 0;
  for (size_t k = 0; k < size && n < max; ++k) {
    const size_t i = (start + k) % size;
    Member& m = members_[i];
    if (m.pending || m.disabled) continue;
    const uint32_t mask =
        static_cast<uint16_t>(SocketRevents(*m.socket, static_cast<short>(m.events & kEventBits)));
    bool report = mask != 0;
    if (m.events & EPOLLET) {
      uint64_t packets = m.last_packets;
      if (mask) packets = m.socket->stream->Stats().packets_received;
      report = mask && (!m.reported || mask != m.last_mask || packets != m.last_packets);
      m.last_mask = mask;
      if (report) {
        m.reported = true;
        m.last_packets = packets;
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

int EpollSet::Wait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                   const sigset_t* sigmask) {
  if (max_events <= 0) return Fail(EINVAL);
  Registry& r = Sets();
  const WaitBudget budget(timeout_ms, Runtime::Get().config().spin_us);
  SpinPause pause;
  for (int round = 0;; ++round) {
    int n = 0;
    bool any_san = false;
    {
      std::shared_lock<std::shared_mutex> reg(r.lifetime);
      if (EpollSet* set = Find(epfd, false)) {
        auto pin = Table().Pin();
        std::lock_guard<std::mutex> lock(set->mu_);
        set->RefreshLocked(epfd);
        any_san = std::any_of(set->members_.begin(), set->members_.end(),
                              [](const Member& m) { return !m.pending; });
        n = set->CollectLocked(events, max_events);
      }
    }
    if (!any_san && n == 0) {
      // Only kernel registrations (left): the kernel does it all, with the time that is left.
      return Real().epoll_pwait(epfd, events, max_events, budget.remaining_ms(), sigmask);
    }
    if (n < max_events && (n > 0 || round % kKernelCheckEvery == 0)) {
      const int k = Real().epoll_wait(epfd, events + n, max_events - n, 0);
      if (k < 0 && n == 0) return -1;
      if (k > 0) n += k;
    }
    if (n > 0) return n;
    const int left = budget.remaining_ms();
    if (left == 0) return 0;
    if (budget.spinning()) {
      pause();
      continue;
    }
    // Sleep until a member's doorbell, a kernel fd of the set, or the timeout; then look again.
    std::vector<pollfd> fds{pollfd{epfd, POLLIN, 0}};
    std::vector<SleepWatch> watches;
    bool ready = false;
    {
      std::shared_lock<std::shared_mutex> reg(r.lifetime);
      EpollSet* set = Find(epfd, false);
      if (!set) return Fail(EBADF);  // closed by another thread meanwhile
      auto pin = Table().Pin();
      std::lock_guard<std::mutex> lock(set->mu_);
      std::vector<SanSocket*> sockets;
      std::vector<short> interest;
      for (const Member& m : set->members_) {
        if (m.pending || m.disabled) continue;
        sockets.push_back(m.socket);
        interest.push_back(static_cast<short>(m.events & kEventBits));
      }
      ready = ArmForSleep(sockets.data(), interest.data(), sockets.size(), &fds, &watches);
    }
    if (ready) {
      round = -1;
      continue;
    }
    const int rc = kernel::ppoll(fds.data(), fds.size(), left, sigmask);
    const int err = errno;
    if (rc <= 0) {
      for (pollfd& p : fds) p.revents = 0;
    }
    {
      auto pin = Table().Pin();
      FinishSleep(watches, fds, &Table());
    }
    if (rc < 0) return Fail(err);
    round = -1;  // the next round looks at the kernel's events again
  }
}

}  // namespace san::compat
