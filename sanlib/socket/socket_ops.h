// The socket layer's operations behind the C API (api.cc): connection life cycle (socket_ops.cc),
// data transfer (data_path.cc), readiness (poll.cc), waiting (wait.cc), options (options.cc) and
// in-band upgrade (upgrade.cc).
//
// Conventions: each returns what the POSIX call returns (-1 with errno set exactly as the kernel
// would); a socket sanlib does not manage goes straight to the kernel. Thread-safety: as the C API.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <memory>
#include <string>

#include "fabric/provider.h"
#include "proto/wire.h"
#include "socket/san_socket.h"

struct san_info;

namespace san {

int SocketCreate(int domain, int type, int protocol);
int Listen(int fd, int backlog);
int Accept(int fd, sockaddr* addr, socklen_t* len, int flags);
int Connect(int fd, const sockaddr* addr, socklen_t len);
int Shutdown(int fd, int how);
int Close(int fd);

ssize_t SendIov(int fd, const iovec* iov, int iovcnt, int flags);
ssize_t RecvIov(int fd, const iovec* iov, int iovcnt, int flags);
int Poll(pollfd* fds, nfds_t nfds, int timeout_ms);
int GetSockOpt(int fd, int level, int name, void* value, socklen_t* len);
int SetSockOpt(int fd, int level, int name, const void* value, socklen_t len);
int Fcntl(int fd, int cmd, long arg);
// In-band upgrade of an established kernel TCP connection both ends of which call it (upgrade.cc).
int Upgrade(int fd);
int GetInfo(int fd, san_info* info);

// Readiness of a SAN socket in poll(2) terms, for the events asked (plus POLLERR/POLLHUP).
short SocketRevents(SanSocket& s, short events);
// Sleeps until one of `sockets` may be ready for its `events` or one of `kernel_fds` is (their
// revents are filled in), the timeout passes (0) or a signal arrives (-1, EINTR). Arms every
// doorbell and re-checks first, so nothing arriving meanwhile is missed. Returns > 0 when woken.
int SleepOnSockets(SanSocket* const* sockets, const short* events, size_t count, pollfd* kernel_fds,
                   nfds_t kernel_count, int timeout_ms);
// Sleeps until the socket may be readable (or writable), the timeout passes (ETIMEDOUT) or a signal
// arrives (EINTR). Arms the doorbell first so nothing arriving meanwhile is missed.
Status SleepOnSocket(SanSocket& s, bool want_write, int timeout_ms);
// Wakes other threads of this process sleeping on `s` (after this thread made progress for them).
void WakeSleepers(SanSocket& s);
// A nonblocking peek at the kernel socket under a SAN connection: nothing (the normal case),
// bytes (which the peer never sends there), or EOF/reset (the peer process is gone).
enum class KernelSide { kQuiet, kData, kGone };
KernelSide PeekKernelSide(int fd);
// The kernel socket under `s` became readable: EOF/reset means the peer process is gone.
void CheckKernelSide(SanSocket& s);

// Connection set-up pieces shared by socket_ops.cc and upgrade.cc.
// Starts managing a kernel socket (nullptr if its fd is beyond the table).
SanSocket* Track(int fd, bool nonblocking);
// Makes a connected socket a SAN one over `stream`, or (stream == nullptr) records why it stays TCP.
void Settle(SanSocket& s, std::unique_ptr<proto::Stream> stream, std::string reason);
// The client half of a SAN channel: a stream over a new endpoint of `provider`, connected to the
// rendezvous at `rendezvous` with `tuple` (the TCP connection it stands beside) as its request.
Result<std::unique_ptr<proto::Stream>> ConnectStream(fabric::Provider& provider,
                                                     const sockaddr* rendezvous, socklen_t len,
                                                     const proto::FourTuple& tuple);
// Blocks (bounded) until the peer's WAKEUP opened the window of a freshly settled SAN socket.
void WaitForWindow(SanSocket& s);
// The kernel socket's addresses in canonical form (proto::CanonicalAddress).
Result<sockaddr_storage> LocalAddress(int fd);
Result<sockaddr_storage> PeerAddress(int fd);

// Process hooks (runtime.cc).
void ShutdownAllForExit();
void NoteForkChild();

}  // namespace san
