// The blocking loop under every data call on a SAN socket (data_path.cc, file_transfer.cc): run
// a nonblocking stream operation, spin, then sleep on the doorbell (the engine all blocking calls
// share: spin_then_sleep.h), honouring the socket's SO_RCVTIMEO/SO_SNDTIMEO; plus the pieces every
// such call shares (the move to kernel TCP, the errno a broken connection reports).
//
// Thread-safety: as the C API (any thread; the stream serialises itself).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>

#include "sanlib/common/clock.h"
#include "sanlib/common/status.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/san_socket.h"
#include "sanlib/socket/socket_ops.h"
#include "sanlib/socket/spin_then_sleep.h"

namespace san {

// The socket behind fd if sanlib carries its data (a SAN channel is up), else null.
inline SanSocket* ShmSocket(int fd) {
  SanSocket* s = Runtime::Get().table().Find(fd);
  if (s && s->mode.load(std::memory_order_acquire) == SocketMode::kShm) return s;
  return nullptr;
}

// The socket behind fd if its data calls are sanlib's: a SAN channel is up, or it is a kernel
// TCP connection that may still move to shm (late_upgrade.h; this may move it now). `on_tcp`:
// the latter, still on the kernel socket (its calls go through LateKernelSend/Recv).
inline SanSocket* DataSocket(int fd, bool* on_tcp) {
  SanSocket* s = Runtime::Get().table().Find(fd);
  *on_tcp = false;
  if (!s || !SanlibCarries(*s)) return nullptr;
  if (s->mode.load(std::memory_order_acquire) == SocketMode::kShm) return s;
  *on_tcp = !LateStep(*s);
  return s;
}

constexpr uint64_t kNoDeadline = ~uint64_t{0};

// One application call's SO_RCVTIMEO / SO_SNDTIMEO clock, however many Drives the call takes.
struct CallDeadline {
  uint64_t first_wait_ns = 0;  // when the call first found it would block
  uint64_t deadline_ns = 0;    // 0: not looked up yet (done only when about to sleep)
};

// When a blocking call that started waiting at `start` must give up: SO_RCVTIMEO / SO_SNDTIMEO
// live on the kernel socket (setsockopt passes them through); the kernel's recv/send honour them.
uint64_t TimeoutDeadline(SanSocket& s, bool want_write, uint64_t start);

// Runs a nonblocking stream operation until it does something: spin, then sleep on the doorbell
// (spin_then_sleep.h). Returns the operation's own result, EAGAIN if nonblocking or when the
// socket's timeout (`call`) passes, EINTR on a signal.
template <typename Op>
Result<size_t> Drive(SanSocket& s, bool want_write, bool nonblocking, CallDeadline* call, Op op) {
  SpinThenSleep engine(Runtime::Get().config(), -1, SpinThenSleep::kLooksAfterWake);
  for (;;) {
    Result<size_t> r = op();
    WakeSleepers(s);  // whatever this attempt reaped may be what another thread waits for
    if (r.ok() || !r.status().would_block() || nonblocking) {
      engine.Found();
      return r;
    }
    const bool spin = engine.Spin();
    if (call->first_wait_ns == 0) call->first_wait_ns = engine.first_miss_ns();
    if (spin) continue;
    const uint64_t now = NowNs();
    // About to sleep: only now is the timeout looked up (a syscall), so spinning stays cheap.
    if (call->deadline_ns == 0) {
      call->deadline_ns = TimeoutDeadline(s, want_write, call->first_wait_ns);
    }
    if (now >= call->deadline_ns) {
      return Status(EAGAIN, want_write ? "SO_SNDTIMEO" : "SO_RCVTIMEO");
    }
    int timeout_ms = -1;
    if (call->deadline_ns != kNoDeadline) {
      timeout_ms = static_cast<int>(
          std::min<uint64_t>((call->deadline_ns - now + 999999) / 1000000, INT32_MAX));
    }
    Status st = SleepOnSocket(s, want_write, timeout_ms);
    if (!st.ok() && st.code() != ETIMEDOUT) return st;  // ETIMEDOUT: the loop checks the deadline
    engine.Woke();
  }
}

// A stream result of kMovedToTcp (the peer moved the connection to TCP, tcp_move.h): advances the
// relay; EAGAIN while it waits (Drive sleeps), kMovedToTcp once the call may go to the kernel
// socket, or the connection's error.
Result<size_t> AfterMove(SanSocket& s, Result<size_t> r);
// The call must go on over the kernel socket (the result AfterMove lets through).
bool MovedOn(const Result<size_t>& r);
// The rest of a call whose connection now continues over the kernel socket: what the kernel
// call returns (n), after `total` bytes the SAN path moved.
ssize_t KernelRest(ssize_t total, ssize_t n);
// The errno a kernel socket would report for a broken connection, once; then EPIPE (send) or EOF
// (0, receive).
int ConnectionErrno(SanSocket& s, int code, bool sending);
// What a receiving call returns when its stream operation failed with `code` after `total` bytes:
// those bytes if any; 0 (EOF) for nothing after shutdown(SHUT_RD) or a broken connection already
// reported; else -1 with the errno a kernel socket gives.
ssize_t RecvFailed(SanSocket& s, size_t total, int code, bool read_shut);

}  // namespace san
