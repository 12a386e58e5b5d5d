// ControlService: the process's control socket (common/control_name.h), served by its connection
// thread. A client sends one request byte, then:
//   'R'  report: we answer with the text report below and close (what `sanstat` shows);
//   'C'  claim: followed by a length byte and that many bytes of an encoded 4-tuple
//        (proto::EncodeConnectRequest); the accepted connection's kernel socket rides with the
//        request byte (SCM_RIGHTS) as the proof. We hand over the channel filed for that tuple
//        under any listener of ours, or orphaned by one we closed (handover.h).
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
  // Hands over the channel filed for a 4-tuple, if `proof_fd` is that very connection (removing it
  // from the owner's books). EPERM: the proof is another socket; ENOENT: no channel for that tuple
  // (a plain client); ENXIO: we serve no rendezvous for its address (any more).
  using TakeChannel =
      std::function<Result<std::unique_ptr<proto::Stream>>(const proto::FourTuple&, int proof_fd)>;

  // Binds this pid's name; harmless if already open for this pid.
  Status Open();
  void Close() { listener_.reset(); }
  int fd() const { return listener_.get(); }
  // Answers every waiting request (each bounded in time).
  void Serve(SocketTable& table, const TakeChannel& take);

  // The report text for `table` (exposed for tests).
  static std::string Report(SocketTable& table);

 private:
  UniqueFd listener_;
  int pid_ = 0;
};

}  // namespace san
