#include "sanlib/socket/late_fork.h"

#include <new>

#include "sanlib/common/fork_path.h"
#include "sanlib/common/log.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/socket/late_holders.h"
#include "sanlib/socket/late_upgrade.h"
#include "sanlib/socket/runtime.h"

namespace san {
namespace {

// At most this many candidates keep their chance across one fork; the child gives up the others,
// as it gives up candidates whose set-up is under way.
constexpr size_t kMaxKept = 256;
// How often a forked candidate looks whether the other process let go of it.
constexpr uint64_t kHoldRecheckNs = 20 * 1000 * 1000;

// The candidates the prepare handler kept (fork handlers run in the forking thread alone, one
// fork at a time: the table's locks are held from prepare to the end, or no other thread
// exists). Emptied before a fork, not after it: a write after it would copy the page.
SanSocket* kept[kMaxKept];
size_t kept_count = 0;

void Keep(SanSocket* s, bool alone) {
  LateUpgrade& u = *s->late;
  if (kept_count == kMaxKept) return;
  if (!alone && !u.mu.try_lock()) return;  // a step under way: the child gives up
  if (u.phase.load() != LatePhase::kWaiting) {
    if (!alone) u.mu.unlock();
    return;
  }
  // Not recorded: the holders are unknown from now on, and this process never moves it.
  const bool recorded = late_holders::Reserve(u, ThisPid());
  if (!u.forked.load()) u.forked.store(true);  // no write if unchanged: the page is copy-on-write
  if (u.hold_check_ns.load() != 0) u.hold_check_ns.store(0);
  if (recorded) {
    kept[kept_count++] = s;
  } else if (!alone) {
    u.mu.unlock();
  }
}

SAN_FORK_PATH bool IsKept(const SanSocket* s) {
  for (size_t i = 0; i < kept_count; ++i) {
    if (kept[i] == s) return true;
  }
  return false;
}

// The child's visit of a candidate it was not given: only marked, since what the set-up made (a
// stream, a listener) is the parent's to use or end; the child drops its copy of the stream's fds
// and mappings.
SAN_FORK_PATH void GiveUpInChild(SanSocket* s) {
  if (!s->late || IsKept(s)) return;
  LateUpgrade& u = *s->late;
  // Not listed in the parent's record (if it has one): its index would name another
  // connection's once that record is freed and made anew.
  if (u.holders_record != late_holders::kNoRecord) u.holders_record = late_holders::kNoRecord;
  if (!LatePending(*s)) return;
  s->late_pending.store(false, std::memory_order_release);
  SetLatePhase(u.phase, LatePhase::kFailed);
  proto::Stream::ForgetForkCopy(std::move(u.stream));
  u.token = 0;
}

}  // namespace

void BeginLateFork() {
  if (kept_count != 0) kept_count = 0;  // no write when none was kept: the page is copy-on-write
}

void KeepAcrossFork(SanSocket* s, bool alone) {
  if (LatePending(*s)) Keep(s, alone);
}

SAN_FORK_PATH void AfterLateFork(bool child, bool alone) {
  if (child) {
    const pid_t self = ThisPid();
    for (size_t i = 0; i < kept_count; ++i) {
      LateUpgrade& u = *kept[i]->late;
      late_holders::TakeReservation(u, self);
      if (alone) continue;
      // Our copies of the kept ones are whole (their step locks were held across the fork), save
      // the locks of the parent's other threads: a reader asleep in the kernel holds in_mu, a
      // kernel call counts in io. Their bytes read by the parent are the parent's to count; a
      // count that differs from the kernel's stops the switch (TrySwitch: "unseen reads").
      new (&u.in_mu) std::mutex();
      u.io.store(0);
    }
  }
  if (child) Runtime::Get().table().ForEachPlain(&GiveUpInChild);
  if (!alone) {
    for (size_t i = 0; i < kept_count; ++i) kept[i]->late->mu.unlock();
  }
}

void LetGoAtExec(SanSocket& s) {
  // Not waited for: in a fork child the lock may be one a thread of the parent held at the fork
  // (a step under way: the child was not given the candidate, and holds no entry anyway).
  std::unique_lock<std::mutex> lock(s.late->mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  late_holders::Leave(*s.late, ThisPid());
  // Should the exec fail, this process holds it unlisted: it must not move it either.
  s.late->holders_record = late_holders::kUnknown;
}

bool SoleHolder(SanSocket& s, uint64_t now_ns) {
  LateUpgrade& u = *s.late;
  if (!u.forked.load()) return true;
  if (now_ns < u.hold_check_ns.load()) return false;
  const pid_t self = ThisPid();
  if (late_holders::OthersHold(u, self)) {
    u.hold_check_ns.store(now_ns + kHoldRecheckNs);
    return false;
  }
  late_holders::Leave(u, self);
  u.forked.store(false);
  SAN_LOG_DEBUG("fd %d: no other process holds the connection any more: it may move", s.fd.load());
  return true;
}

}  // namespace san
