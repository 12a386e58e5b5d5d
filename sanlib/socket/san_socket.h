// SanSocket: what sanlib knows about one socket the application holds.
//
// The fd is a real kernel TCP socket (identity, addresses, liveness). Once connected, the socket is
// in one mode: kShm (data over a proto::Stream: on the shm provider, or on verbs -- the stream's
// endpoint says which, Endpoint::provider_kind) or kTcp (fallback: every data
// call goes to the kernel, and `fallback_reason` says why). The one change is kShm -> kTcp, when a
// connection moves to its kernel socket (tcp_move.h); the stream then stays until the socket goes,
// for threads that read the mode before the change. Listening sockets carry no
// stream; the connection thread serves their rendezvous.
//
// Thread-safety: mode and stream are set once, by the thread that connects/accepts, before the
// socket is published in the SocketTable (or under the connect call the application itself
// serialises); after that they are read-only, but for the move to TCP (turned_tcp guards it). Data
// calls are made thread-safe by the Stream's lock. Ownership: the SocketTable owns live sockets;
// after the application's close, the close thread owns the stream until the FIN handshake ends.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>

#include "sanlib/common/unique_fd.h"
#include "sanlib/proto/stream.h"
#include "sanlib/socket/late_upgrade.h"
#include "sanlib/socket/waiter_set.h"

namespace san {

enum class SocketMode : int { kUnconnected = 0, kTcp = 1, kShm = 2 };

struct SanSocket {
  explicit SanSocket(int kernel_fd) : fd(kernel_fd), id(next_id.fetch_add(1) + 1) {}
  ~SanSocket();  // socket_ops.cc

  // One fd number that names the kernel socket. dup() gives the socket more numbers (fd_count);
  // when this one is closed while others remain, it is moved to one of them (Close).
  std::atomic<int> fd;
  std::atomic<int> fd_count{1};
  // The kernel socket's inode (0 until known): a number in the table whose fd no longer names it
  // was closed behind our back (socket_ops.h: ReleaseGhost). Learned at the first look
  // (IsGhost), not at creation: a short connection costs no fstat.
  std::atomic<ino_t> kernel_ino{0};
  // Never reused within a process: tells a socket from a later one at the same address/fd number
  // (epoll interest lists hold fd numbers across calls).
  const uint64_t id;
  static inline std::atomic<uint64_t> next_id{0};
  std::atomic<SocketMode> mode{SocketMode::kUnconnected};
  std::string fallback_reason;            // set before mode becomes kTcp
  std::unique_ptr<proto::Stream> stream;  // kShm only
  std::atomic<bool> nonblocking{false};
  std::atomic<bool> listening{false};
  // Listening sockets: the process whose connection thread serves the SAN rendezvous (0: none).
  // A fork child that accepts on an inherited listener claims channels from it (handover.h).
  std::atomic<int> rendezvous_owner{0};
  std::atomic<bool> read_shut{false};       // shutdown(SHUT_RD) was called
  std::atomic<bool> tcp_gone{false};        // the kernel socket underneath reported EOF/reset
  std::atomic<bool> error_reported{false};  // the connection's error was returned once already
  std::atomic<bool> connecting{false};      // nonblocking connect(): the kernel half is in progress
  std::atomic<bool> turned_tcp{false};      // a moved connection became kTcp (tcp_move.h): once
  std::atomic<bool> relay_watched{false};   // the close thread drives its relay (tcp_move.h)
  std::atomic<int> connect_error{0};        // the kernel half failed with this errno (SO_ERROR)
  // Reads that returned EAGAIN (the program took everything there was): readiness to read after
  // one is a new edge for an edge-triggered epoll member, whatever else changed (epoll_set.cc).
  std::atomic<uint64_t> reads_drained{0};
  bool nodelay_requested = false;  // TCP_NODELAY set before the stream existed
  // The threads of this process sleeping on the socket, woken when another thread made progress
  // for them (the doorbell only rings for the peer's packets); `sleepers` counts them.
  WaiterSet waiters;
  std::atomic<int> sleepers{0};
  // Which processes still hold the connection (fork): each holds copies of both ends, taken by
  // fork() atomically and dropped by the kernel at exit, _exit and exec (CLOEXEC). At close, with
  // our `holders_write` closed, `holders_read` polls POLLHUP iff no other process holds a write
  // end (socket_ops.cc DropOwnHold); before a hand-on, with our read end closed, a probe write
  // fails with EPIPE iff no other process holds a read end (fork_holders.h OthersHold). A shared
  // count would leak on _exit/exec and race a parent that closes before the child ran its atfork
  // handler. Made when the stream is settled at connect or accept, or, for a connection moved to
  // shm after it connected (the late move, san_upgrade), by the first fork that shares it
  // (fork_holders.h HoldAcrossFork): a process that never forks saves the pipe's two fds per
  // channel. Invalid until then, or if making it failed (`holders_lost`: the count is used, and
  // the connection is never handed on).
  UniqueFd holders_read;
  UniqueFd holders_write;
  bool holders_lost = false;
  bool holders_counted = false;  // counted in the fd budget (fd_budget.h CountHoldersPipes)
  // A fork copied it (HoldAcrossFork), maybe long ago: a vfork child, which cannot probe the pipe
  // without changing its parent's fds, takes it as held by others for good (exec_handoff.h).
  std::atomic<bool> fork_shared{false};
  // A kernel-TCP connection that may still move to shm (late_upgrade.h); set once, right after
  // it settles as kTcp. `late_made` is stored (release) once it is: a thread that did not call in
  // through the socket (sanstat's report) reads `late` only after seeing it.
  std::unique_ptr<LateUpgrade> late;
  std::atomic<bool> late_made{false};
  std::atomic<bool> late_pending{false};
};

inline bool LatePending(const SanSocket& s) {
  return s.late_pending.load(std::memory_order_acquire);
}

// Whether sanlib takes part in the socket's data calls and readiness: it is carried by a SAN
// stream (kShm), or it is a kernel TCP connection that may still move there (late_upgrade.h),
// whose kernel calls sanlib must count and whose move it must notice. late_pending is read before
// mode: a switch publishes kShm before it clears late_pending (late_upgrade.cc TrySwitch), so a
// call racing a switch sees one or the other, never neither -- a call that saw neither would go
// to the kernel socket behind the switch's back (a send after the count the peer reads up to is
// never read; a read takes the peer's wake byte as data).
inline bool SanlibCarries(const SanSocket& s) {
  const bool late = LatePending(s);
  const SocketMode mode = s.mode.load(std::memory_order_acquire);
  return mode == SocketMode::kShm || (late && mode == SocketMode::kTcp);
}

// Whether the socket is a plain kernel TCP connection for good: TCP, and sanlib takes no part in
// it (fallen back, moved to kernel TCP, or a late candidate that will not move).
inline bool KernelAlone(const SanSocket& s) {
  return s.mode.load(std::memory_order_acquire) == SocketMode::kTcp && !SanlibCarries(s);
}

}  // namespace san
