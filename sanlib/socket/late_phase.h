// The phases of a late move (late_upgrade.h), and whether any move of this process is under way.
//
// A late candidate is a kernel TCP connection, and while none of this process's candidates is
// moving, the kernel's readiness for every one of them is the whole truth: the peer's wake byte
// comes only to an end whose move is under way, and a socket that switched to shm settled
// (socket_ops.h Settle) first. The readiness paths (epoll_set.cc) then pass the kernel's events on
// as they are, without finding each event's socket under the set's locks: under a stream of short
// connections, where no candidate lives long enough to move, that look-up cost more user time per
// request than the rest of sanlib's interposition together.
//
// Every phase change goes through SetLatePhase, which keeps the count of moving candidates; a
// change that ends a move (switched, given up, freed) and every socket settling on a stream bump a
// generation first, which a reader compares with the one it saw when it last looked at its
// members: `LateQuiet(seen)` is true only if no candidate is moving now and none moved or settled
// since.
//
// Every change also wakes the threads asleep in the kernel on candidates, if any (late_kick.h).
//
// Thread-safety: lock-free (seq_cst atomics); a fork child inherits the counts with the phases.
#pragma once

#include <atomic>
#include <cstdint>

namespace san {

enum class LatePhase : uint8_t {
  kWaiting,     // until the delay has passed
  kListening,   // lower end: the private rendezvous is open
  kConnecting,  // upper end: reaching the peer's rendezvous (backoff between attempts)
  kAnswering,   // upper end: its request sent, the peer's answer not taken yet
  kReady,       // the stream is ours, not switched yet
  kSwitched,    // the socket is kShm; the inflow may still be running
  kFailed,      // stays kernel TCP
};

namespace late_activity {
inline std::atomic<int> moving{0};           // candidates in a moving phase
inline std::atomic<uint64_t> generation{0};  // bumped by every end of a move and shm settle
inline std::atomic<int> sleepers{0};         // threads asleep on the kick (late_kick.h)
}  // namespace late_activity

// Writes the kick (late_kick.cc).
void WakeLateSleepers();

// After a change is published: ends the sleeps that did not see it.
inline void KickLateSleepers() {
  if (late_activity::sleepers.load() > 0) WakeLateSleepers();
}

inline bool IsMovingPhase(LatePhase p) {
  return p == LatePhase::kListening || p == LatePhase::kConnecting || p == LatePhase::kAnswering ||
         p == LatePhase::kReady;
}

// A socket settled on a stream (or a move ended): readers must look at their members again.
inline void NoteReadinessChange() {
  late_activity::generation.fetch_add(1);
  KickLateSleepers();
}

// The generation a reader records before it looks at its members.
inline uint64_t ReadinessGeneration() { return late_activity::generation.load(); }

// No candidate is moving, and none moved or settled since `seen` (read `moving` first: a move
// that ended bumped the generation before it stopped counting).
inline bool LateQuiet(uint64_t seen) {
  return late_activity::moving.load() == 0 && late_activity::generation.load() == seen;
}

// Changes a candidate's phase, counting the moving ones.
inline void SetLatePhase(std::atomic<LatePhase>& phase, LatePhase next) {
  const bool was = IsMovingPhase(phase.exchange(next));
  const bool is = IsMovingPhase(next);
  if (was == is) return;
  if (is) {
    late_activity::moving.fetch_add(1);
  } else {
    late_activity::generation.fetch_add(1);
    late_activity::moving.fetch_sub(1);
  }
  KickLateSleepers();
}

}  // namespace san
