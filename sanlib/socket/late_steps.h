// The one set-up step a late candidate's data path (late_io.cc) takes itself: a lower end whose
// read meets the peer's wake byte takes the half of the channel its peer made first (PeerEnd).
// Internal to the late upgrade's two files: late_upgrade.cc (the set-up) and late_io.cc (the data
// calls of a candidate); other callers use late_upgrade.h.
//
// Thread-safety: the caller holds the candidate's LateUpgrade::mu.
#pragma once

namespace san {

struct SanSocket;
struct LateUpgrade;

namespace late {

// The set-up steps that are due (late_upgrade.h): open the lower end's private rendezvous, reach
// the peer's, take the half the peer made or the answer to our request.
void Advance(SanSocket& s, LateUpgrade& u);

}  // namespace late
}  // namespace san
