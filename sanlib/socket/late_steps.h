// What a late candidate's data path (late_io.cc) needs of the set-up (late_upgrade.cc): the
// set-up's steps (a lower end whose read meets the peer's wake byte takes the half of the channel
// its peer made first: PeerEnd), and which phases have a move under way. Internal to those two
// files; other callers use late_upgrade.h.
#pragma once

#include "sanlib/socket/late_upgrade.h"

namespace san {
namespace late {

// The set-up steps that are due (late_upgrade.h): open the lower end's private rendezvous, reach
// the peer's, take the half the peer made or the answer to our request. The caller holds the
// candidate's LateUpgrade::mu.
void Advance(SanSocket& s, LateUpgrade& u);

// SAN_UPGRADE_DELAY_US in ns: the age, and the spell of use, that moves a connection by time.
uint64_t DelayNs();

// Whether the upper end's request reached the peer's side: the channel is made, or its answer is
// on the way.
inline bool Underway(LatePhase phase) {
  return phase == LatePhase::kAnswering || phase == LatePhase::kReady;
}

}  // namespace late
}  // namespace san
