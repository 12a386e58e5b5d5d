// Moving a SAN connection to its kernel TCP socket (the protocol: proto/stream.h "Moving to TCP";
// when it is used: socket/exec_handoff.h). Two halves:
//   MoveToTcp     the mover: an exec into an image without sanlib, whose new image will use the
//                 kernel socket directly. Afterwards the socket is a plain TCP one in this image
//                 too.
//   AdvanceMoved  the peer: runs the relay (the returned bytes back, then our unposted ones) on
//                 whichever data call, poll or close gets there; once it is done and the SAN queue
//                 is drained, the socket becomes a plain TCP one (mode kTcp, with the reason).
// Until then a moved socket stays kShm: reads take what the SAN queue holds first, then the
// kernel socket; writes go to the kernel socket once the relay is done.
//
// Thread-safety: the relay's state is the stream's (shared, under its lock). MoveToTcp runs on the
// exec'ing thread with no other thread on the socket (ExecHandoff checks).
#pragma once

#include <cstdint>

#include "sanlib/common/status.h"
#include "sanlib/proto/stream.h"
#include "sanlib/socket/san_socket.h"

namespace san {

// How long a mover waits for the peer's MOVED and then for the kernel to take the handover.
constexpr int kMoveWaitMs = 1000;

// The mover's half (`why` becomes the socket's reason, after "moved to kernel TCP: "). Ok: the
// socket is kTcp (its spent stream stays until close) and the kernel socket carries the connection
// at the offsets both ends agree on. Otherwise nothing moved; if MOVE had gone out the stream is
// failed (the peer's relay sees ECONNRESET when our kernel socket closes), so the caller must not
// go on using it over SAN (ExecHandoff gives the new image a reset socket).
Status MoveToTcp(SanSocket& s, uint64_t deadline_ns, const char* why);
// MoveToTcp in two halves, so that a process moving several connections waits for all their
// peers at once: Start posts MOVE (nothing has changed if it fails), Finish does the rest, through
// `kernel_fd`, the number this process holds the kernel socket under (s.fd, except in a vfork
// child, whose fd table is its own: exec_handoff.h).
Status StartMoveToTcp(SanSocket& s, uint64_t deadline_ns);
Status FinishMoveToTcp(SanSocket& s, int kernel_fd, uint64_t deadline_ns, const char* why);

// The peer's half, for a socket whose stream reports Moved(). Ok: the kernel socket carries what
// follows. EAGAIN: the relay waits for the kernel socket (readable, or writable). Otherwise the
// connection's error.
Status AdvanceMoved(SanSocket& s);

// A kernel socket as the relay's RelayIo (nonblocking, no SIGPIPE).
class KernelRelayIo : public proto::RelayIo {
 public:
  explicit KernelRelayIo(int fd) : fd_(fd) {}
  ssize_t Peek(void* buf, size_t n) override;
  ssize_t Consume(void* buf, size_t n) override;
  ssize_t Write(const void* buf, size_t n) override;
  int ShutdownWrite() override;

 private:
  int fd_;
};

}  // namespace san
