#include "sanlib/socket/fd_passing.h"

#include "sanlib/common/clock.h"
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

}  // namespace

void PrepareToPass(const int* fds, size_t count) {
  Runtime* rt = Runtime::IfCreated();
  if (!rt || count == 0) return;
  auto pin = rt->table().Pin();
  for (size_t i = 0; i < count; ++i) {
    SanSocket* s = rt->table().Find(fds[i]);
    if (!s || s->listening.load()) continue;
    if (LatePending(*s)) EndLateUpgrade(*s, true, "passed to another process (SCM_RIGHTS)");
    if (s->mode.load(std::memory_order_acquire) != SocketMode::kShm || !s->stream) continue;
    if (const char* why = WhyNotMovable(rt->table(), *s)) {
      SAN_LOG_WARN(
          "fd %d passed to another process: its SAN connection cannot move to kernel TCP "
          "(%s); the receiver's socket will carry nothing",
          fds[i], why);
      continue;
    }
    const uint64_t deadline = NowNs() + uint64_t{kMoveWaitMs} * 1000000;
    Status st = MoveToTcp(*s, deadline, "its fd was passed to another process (SCM_RIGHTS)");
    if (st.ok()) {
      SAN_LOG_INFO("fd %d passed to another process: moved to kernel TCP", fds[i]);
    } else {
      SAN_LOG_WARN("fd %d passed to another process: the move to kernel TCP failed (%s)", fds[i],
                   st.ToString().c_str());
    }
  }
}

}  // namespace san
