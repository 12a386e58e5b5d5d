// ControlService: the process's control socket (common/control_name.h), served by its connection
// thread. A client sends one request byte, then:
//   'R'  report: we answer with the text report below and close (what `sanstat` shows);
//   'C'  claim: followed by a length byte and that many bytes of an encoded 4-tuple
//        (proto::EncodeConnectRequest); the accepted connection's kernel socket rides with the
//        request byte (SCM_RIGHTS) as the proof. We hand over the channel filed for that tuple
//        under any listener of ours, or orphaned by one we closed (handover.h). A claim whose
//        channel may still come (settling, or its client's port not named yet) is kept and
//        asked again at every pass of the thread until kClaimWaitNs, never waited for: the
//        thread goes on serving rendezvous requests and other claims meanwhile.
// Reports go only to a peer with our uid, or root. A claim is answered whatever the claimer's uid
// when it proves it holds the connection itself (the passed socket's local and peer addresses are
// the tuple's: a 4-tuple names one connection in the network namespace): whoever accepted it may
// use it anyway (a prefork server whose workers drop privileges, like nginx). The claimer, for its
// part, takes a channel only from the listener's owner of its own uid or root (handover.cc).
//
// Report format, tab-separated fields, one line per socket after a header line:
//   #sanlib-stat 1 <pid> <comm>
//   fd  role  mode  local  peer  bytes_sent  bytes_received  credits  mtu  phase  fallback_reason
//   role: listen|conn   mode: shm|verbs|tcp|none (the provider under a SAN stream)
//   phase: proto::ClosePhaseName or "-"
//
// Thread-safety: Open/Close/Serve are called by the connection thread only (and the atfork hooks
// while no other thread runs). Ownership: owns its listening socket.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/socket_table.h"

namespace san {

class ControlService {
 public:
  static constexpr char kReport = 'R';
  static constexpr char kClaim = 'C';
  // How long a claim is asked again: below the claimer's own bound (2 s, handover.cc), so that it
  // gets our answer.
  static constexpr uint64_t kClaimWaitNs = 1500ull * 1000000;
  // How long a claim is asked again at once, before it is kept for later passes (also how long
  // ConnectionThread::Claim asks again before it sleeps).
  static constexpr uint64_t kClaimSpinNs = 50ull * 1000;
  // Hands over the channel filed for a 4-tuple, if `proof_fd` is that very connection (removing it
  // from the owner's books). EPERM: the proof is another socket; ENOENT: no channel for that tuple
  // (a plain client); ENXIO: we serve no rendezvous for its address (any more); EAGAIN: one may
  // still come (not with `last`: the claim's time is up).
  using TakeChannel = std::function<Result<std::unique_ptr<proto::Stream>>(
      const proto::FourTuple&, int proof_fd, bool last)>;

  // Binds this pid's name; harmless if already open for this pid.
  Status Open();
  // Also forgets the kept claims (a fork child's copies are the parent's to answer).
  void Close() {
    listener_.reset();
    parked_.clear();
  }
  int fd() const { return listener_.get(); }
  // Answers every waiting request (each bounded in time); keeps claims told EAGAIN.
  void Serve(SocketTable& table, const TakeChannel& take);
  // Asks again for the kept claims, answering those that are done or out of time.
  void ServeParked(const TakeChannel& take);
  bool has_parked() const { return !parked_.empty(); }

  // The report text for `table` (exposed for tests).
  static std::string Report(SocketTable& table);

 private:
  struct Parked {
    UniqueFd conn;
    proto::FourTuple tuple;
    UniqueFd proof;
    uint64_t until_ns;
  };
  // Takes the channel for a claim and answers it, or keeps the claim (true) to ask again.
  bool TryClaim(int conn, const proto::FourTuple& tuple, int proof_fd, bool last,
                const TakeChannel& take);

  UniqueFd listener_;
  int pid_ = 0;
  std::vector<Parked> parked_;
};

}  // namespace san
