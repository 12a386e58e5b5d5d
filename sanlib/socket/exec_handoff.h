// ExecHandoff: what exec() does to this process's SAN connections (DESIGN.md "fork safety":
// "the new image re-attaches or the connection degrades cleanly, never silently corrupts").
//
// exec keeps the kernel socket of every fd that is not close-on-exec, but a SAN connection's data
// goes over a stream whose state is in this image's memory: a new image that only saw the kernel
// socket would read and write a TCP connection the peer no longer uses. So, right before the real
// exec (compat/interpose_exec.cc), Prepare() settles every connected SAN socket the new image
// would inherit:
//
//   moves       the new image runs the compatibility layer (compat decides: LD_PRELOAD, not
//               setuid, not static), this process is the connection's only holder (the fork-
//               holder pipe, SanSocket::holders_*: with our read end closed, a probe write fails
//               with EPIPE only when no other holder is left, and our write end stays open so a
//               holder closing meanwhile never takes itself for the last; for a socket on fd 0-2
//               -- the inetd and shell patterns, whose parent closes its copy just after fork --
//               we wait up to kStdioHolderWaitMs for the others to let go), and no other thread
//               of ours is asleep on it (it might
//               have a single-copy window open): the stream is exported (proto::Stream::Export,
//               as the prefork handover does) into a sealed memfd named by SAN_INHERIT=<fd> in the
//               new image's environment (exec_image.h), and the new image's layer imports it
//               under the same fd numbers at start-up (AdoptInherited) -- same stream, same shm.
//   to TCP      the new image does not run the layer, and the connection is ours alone: it moves
//               to its kernel socket on both ends (tcp_move.h): MOVE is posted on every such
//               connection first, then the peers' MOVED are awaited together (kMoveWaitMs), and
//               the new image finds a plain TCP connection at the agreed offsets.
//   placeholder otherwise (another holder, another thread asleep on it, a peer that did not
//               answer the move, both ends ours): each inherited number is swapped, for the exec
//               only, for a TCP socket whose connection was reset: the new image reads ECONNRESET
//               (then EOF) and writes get EPIPE -- never a silent TCP connection nobody reads. The
//               connection itself is left to whoever else holds it; if nobody does, it ends when
//               our image goes (the peer sees ECONNRESET).
//   closes      all of a connection's numbers are close-on-exec and we are its only holder: if
//               the new image runs the layer the stream moves anyway, flagged "close on arrival",
//               and the new image closes it at start-up (FIN: the peer reads EOF, as when a
//               kernel socket's last fd goes); into an image without the layer it moves to TCP,
//               and the exec's close of the kernel socket is TCP's close. Otherwise it ends as
//               above.
//
// A failed exec calls Abandon(), which puts every fd and timer back: the caller's sockets
// carry on as if exec had not been called. Export does not disturb the stream (it copies), so
// nothing is lost either way.
//
// vfork(): a vfork child runs in its parent's memory with its own fd table (Python's subprocess:
// it closes every fd but the ones it keeps and dup2s a connection given as stdin to 0; those calls
// went to the kernel alone, Runtime::InVforkChild, and left sanlib's own close-on-exec fds open
// for this). Its inherited numbers that name one of the parent's SAN connections are found by the
// kernel socket's identity, not by the table's numbers. Each such connection moves to its kernel
// socket on both ends, run from the child on the parent's socket (the same memory) through the
// child's number, so the parent and the new image share a kernel TCP connection, as they would
// without sanlib. Where the child cannot run the move (WhyVforkChildCannotMove: another thread
// asleep on it, a fork shared it, its other end may be ours, it is not on shm, the child closed an
// fd the move needs) its numbers get the placeholder as above, and the parent's connection carries
// on over SAN. Nothing else of the parent's changes, and the table's lock is released before the
// exec (the parent takes it again). As for any mover, a peer that does not answer the move in
// kMoveWaitMs loses the connection, here the parent's too (docs/compat.md lists the gaps).
//
// Thread-safety: Prepare/Abandon run on the exec'ing thread; the table is pinned meanwhile (a
// close() on another thread waits). Another thread still sending on a connection that moves after
// Prepare copied it is an application race (with the kernel the bytes would go out; here they are
// lost to the new image): exec while other threads use the socket is not supported.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "sanlib/common/unique_fd.h"
#include "sanlib/proto/stream.h"
#include "sanlib/socket/san_socket.h"

namespace san {

class Runtime;

class ExecHandoff {
 public:
  // How long an exec waits for other holders of a socket on fd 0-2 to close it.
  static constexpr int kStdioHolderWaitMs = 1000;

  // Right before the real exec. `new_image_runs_layer`: the new image will load this layer
  // (compat/exec_target.h). nullptr when no SAN connection is inherited (nothing to do).
  static std::unique_ptr<ExecHandoff> Prepare(bool new_image_runs_layer);
  ~ExecHandoff();

  // "SAN_INHERIT=<fd>" for the new image's environment, or empty when nothing moves.
  const std::string& environment_entry() const { return env_entry_; }
  // The exec failed: everything back as before Prepare. Call once, on the exec'ing thread.
  void Abandon();

  ExecHandoff(const ExecHandoff&) = delete;
  ExecHandoff& operator=(const ExecHandoff&) = delete;

 private:
  ExecHandoff() = default;
  struct Moved {
    SanSocket* socket;
    std::vector<int> numbers;
    bool close_on_arrival;
    UniqueFd private_number;   // close on arrival: the new image's number for the kernel socket
    proto::StreamImage image;  // owns the exported (non-close-on-exec) endpoint fds
  };
  struct Swapped {
    int number;
    UniqueFd saved;  // the real socket, close-on-exec, while a placeholder holds `number`
  };
  // Whether we are the only process holding `s`, waiting up to wait_ms for the others to go.
  bool CheckSole(SanSocket& s, int wait_ms);
  void Swap(int number);
  // A vfork child's whole hand-off (above).
  void HandOffInVforkChild(Runtime& rt);
  bool Move(SanSocket& s, std::vector<int> numbers, bool close_on_arrival);
  bool WriteMemfd(const std::vector<std::byte>& bytes);

  bool vfork_child_ = false;
  std::shared_lock<std::shared_mutex> pin_;
  std::vector<Moved> moved_;
  std::vector<Swapped> swapped_;
  UniqueFd memfd_;
  std::string env_entry_;
};

// In the new image, before main (compat's start-up hook): imports the connections SAN_INHERIT
// names (`value` is the variable's value) under their fd numbers, closes the memfd and removes
// the variable. A connection that cannot be imported is reset (its numbers get the placeholder).
void AdoptInherited(const char* value);

}  // namespace san
