#include "sanlib/socket/fd_passing.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sanlib/common/clock.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/socket/fork_holders.h"
#include "sanlib/socket/late_upgrade.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"
#include "sanlib/socket/tcp_move.h"

namespace san {
namespace {

// Why `s` cannot move to TCP now, or nullptr if it can.
const char* WhyNotMovable(SocketTable& table, SanSocket& s) {
  if (!MayHandOn(s)) return "another thread waits on it, or its holders are unknown";
  if (OthersHold(s)) return "another process of ours holds it";
  if (PeerIsOurs(table, s)) return "its peer is in this process";
  return nullptr;
}

// Whether PrepareToPass has anything to do for `s`: a late candidate, or a connection on shm.
bool Passable(const SanSocket& s) {
  if (s.listening.load()) return false;
  return LatePending(s) || (s.mode.load(std::memory_order_acquire) == SocketMode::kShm && s.stream);
}

}  // namespace

void PrepareToPass(const int* fds, size_t count, const char* via) {
  Runtime* rt = Runtime::IfCreated();
  if (!rt || count == 0) return;
  auto pin = rt->table().Pin();
  const std::string passed = std::string("passed to another process (") + via + ")";
  const std::string moved = std::string("its fd was passed to another process (") + via + ")";
  // Every move is started before any is waited for, against one deadline: a process passing
  // several connections (a spawned child inherits them all) waits for their peers at once.
  const uint64_t deadline = NowNs() + uint64_t{kMoveWaitMs} * 1000000;
  std::vector<std::pair<int, SanSocket*>> started;
  for (size_t i = 0; i < count; ++i) {
    SanSocket* s = rt->table().Find(fds[i]);
    if (!s || !Passable(*s)) continue;
    if (std::any_of(started.begin(), started.end(), [s](const auto& f) { return f.second == s; })) {
      continue;  // another number of a connection already on its way
    }
    if (LatePending(*s)) EndLateUpgrade(*s, true, passed.c_str());
    if (s->mode.load(std::memory_order_acquire) != SocketMode::kShm || !s->stream) continue;
    if (const char* why = WhyNotMovable(rt->table(), *s)) {
      SAN_LOG_WARN(
          "fd %d passed to another process (%s): its SAN connection cannot move to kernel TCP "
          "(%s); the receiver's socket will carry nothing",
          fds[i], via, why);
      continue;
    }
    Status st = StartMoveToTcp(*s, deadline);
    if (st.ok()) {
      started.emplace_back(fds[i], s);
    } else {
      SAN_LOG_WARN("fd %d passed to another process (%s): the move to kernel TCP failed (%s)",
                   fds[i], via, st.ToString().c_str());
    }
  }
  for (const auto& [fd, s] : started) {
    Status st = FinishMoveToTcp(*s, s->fd.load(), deadline, moved.c_str());
    if (st.ok()) {
      SAN_LOG_INFO("fd %d passed to another process (%s): moved to kernel TCP", fd, via);
    } else {
      SAN_LOG_WARN("fd %d passed to another process (%s): the move to kernel TCP failed (%s)", fd,
                   via, st.ToString().c_str());
    }
  }
}

std::vector<PassableFd> PassableFds() {
  std::vector<PassableFd> out;
  Runtime* rt = Runtime::IfCreated();
  if (!rt) return out;
  auto pin = rt->table().Pin();
  rt->table().ForEachNumber([&](int fd, SanSocket* s) {
    if (!Passable(*s)) return;
    out.push_back({fd, kernel::CloseOnExec(fd)});
  });
  return out;
}

}  // namespace san
