// The socket layer's operations behind the C API (api.cc): connection life cycle (socket_ops.cc),
// data transfer (data_path.cc), readiness (poll.cc, epoll.cc), waiting (wait.cc), options
// (options.cc) and in-band upgrade (upgrade.cc).
//
// Conventions: each returns what the POSIX call returns (-1 with errno set exactly as the kernel
// would); a socket sanlib does not manage goes straight to the kernel. Thread-safety: as the C API.
#pragma once

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "sanlib/common/kernel.h"
#include "sanlib/fabric/provider.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/san_socket.h"
#include "sanlib/socket/socket_table.h"

struct san_info;

namespace san {

int SocketCreate(int domain, int type, int protocol);
int Listen(int fd, int backlog);
int Accept(int fd, sockaddr* addr, socklen_t* len, int flags);
int Connect(int fd, const sockaddr* addr, socklen_t len);
int Shutdown(int fd, int how);
int Close(int fd);
// Whether this is a vfork child closing one of sanlib's own fds (close-on-exec, where sanlib
// places its fds): such a close is left undone, the fd staying in the child's table until its
// exec closes it, since the exec hand-off moves a connection the child keeps through them
// (exec_handoff.h). Costs no system call unless `fd` is in sanlib's places.
bool VforkChildKeeps(int fd);
// What close(fd) does to sanlib's side of fd, without closing the kernel fd (dup2/dup3 onto fd,
// where the kernel closes it as part of the call).
void Release(int fd);
// fd was duplicated as dup_fd (dup, dup2, dup3, F_DUPFD): both numbers name the one SAN socket.
void NoteDuplicate(int fd, int dup_fd);
// Ghosts: a SAN socket whose number the application closed where no interposition sees it (a raw
// close system call: Node.js's libuv closes that way; close_range from inside libc) stays in the
// table, and the next socket the kernel gives that number would be taken for it (it was reset,
// from plain clients too). IsGhost: fd no longer names s's kernel socket (closed, or another
// object now); the first look at a socket whose inode is not known yet learns it (a number that
// names no socket at all is a ghost). ReleaseGhost: ends our side of it as close() would, never
// touching the number (it may be someone else's now). Done where the kernel hands out a number
// we hold (Track, NoteDuplicate: a ghost for certain) and by the connection thread's sweep, once
// a second (SweepGhosts).
bool IsGhost(int fd, SanSocket& s);
void ReleaseGhost(int fd);
void SweepGhosts();

ssize_t SendIov(int fd, const iovec* iov, int iovcnt, int flags);
ssize_t RecvIov(int fd, const iovec* iov, int iovcnt, int flags);
int Poll(pollfd* fds, nfds_t nfds, int timeout_ms, const sigset_t* sigmask = nullptr);
// epoll over SAN sockets and kernel fds (epoll.cc, epoll_set.h): the epoll fd is a kernel epoll
// instance; the calls are epoll_create1, epoll_ctl, epoll_pwait (sigmask may be null) and
// epoll_pwait2 (timeout null = none; rounded up to the millisecond once SAN sockets are involved).
// A wait with only kernel fds to watch sleeps in `kernel_waits`: the raw system calls by default;
// the compatibility layer passes libc's, which are pthread cancellation points, as the program
// expects of epoll_wait.
struct KernelEpollWaits {
  int (*pwait)(int, epoll_event*, int, int, const sigset_t*) = kernel::epoll_pwait;
  int (*pwait2)(int, epoll_event*, int, const timespec*, const sigset_t*) = kernel::epoll_pwait2;
};
int EpollCreate(int flags);
int EpollCtl(int epfd, int op, int fd, epoll_event* event);
int EpollWait(int epfd, epoll_event* events, int max_events, int timeout_ms,
              const sigset_t* sigmask = nullptr, KernelEpollWaits kernel_waits = {});
int EpollWait2(int epfd, epoll_event* events, int max_events, const timespec* timeout,
               const sigset_t* sigmask, KernelEpollWaits kernel_waits = {});
// fd no longer names what it named (closed, or replaced by dup2/dup3): if it was an epoll fd, the
// set of SAN registrations kept for it is forgotten. Close does this itself.
void EpollClosed(int fd);
int GetSockOpt(int fd, int level, int name, void* value, socklen_t* len);
int SetSockOpt(int fd, int level, int name, const void* value, socklen_t len);
int Fcntl(int fd, int cmd, long arg);
int Ioctl(int fd, unsigned long request, void* arg);
// In-band upgrade of an established kernel TCP connection both ends of which call it (upgrade.cc).
int Upgrade(int fd);
int GetInfo(int fd, san_info* info);

// What one look at a SAN socket's readiness depended on, for a later look to reuse its answer
// while none of it changed (StampHolds): epoll_wait looks at every member of a set at each call,
// and most of a thousand keep-alive connections have nothing new.
struct ReadinessStamp {
  uint64_t version = 0;  // the stream's version after the look (proto::Stream::Version); 0: none
  uint64_t packets_received = 0;  // the stream's count then
  bool read_shut = false;
  bool error_reported = false;
};
// Readiness of a SAN socket in poll(2) terms, for the events asked (plus POLLERR/POLLHUP). With
// `stamp`, also what the answer depended on (version 0 if it may not be reused: a connect in
// progress, the peer's TCP bytes still to read, a move to TCP, other threads asleep on it).
short SocketRevents(SanSocket& s, short events, ReadinessStamp* stamp = nullptr);
// True if SocketRevents would give what it gave with `stamp`, for the same events: no operation
// on the stream since, nothing for it waiting in the endpoint, and the socket's own flags the same.
// A few atomic loads, no lock. It may miss what another thread is reaping at this very moment (as
// a look just before would have): a caller about to sleep looks the slow way first.
bool StampHolds(SanSocket& s, const ReadinessStamp& stamp);
// Sleeps until one of `sockets` may be ready for its `events` or one of `kernel_fds` is (their
// revents are filled in), the timeout passes (0) or a signal arrives (-1, EINTR). Arms every
// doorbell and re-checks first, so nothing arriving meanwhile is missed. Returns > 0 when woken.
// `sigmask` (may be null) is in force during the sleep, as with ppoll.
int SleepOnSockets(SanSocket* const* sockets, const short* events, size_t count, pollfd* kernel_fds,
                   nfds_t kernel_count, int timeout_ms, const sigset_t* sigmask = nullptr);
// SleepOnSockets in two halves, for a caller that sleeps in its own poll (EpollSet::Wait):
// the kernel fds that stand for one SAN socket while a thread sleeps on it.
struct SleepWatch {
  SanSocket* socket;
  uint64_t id;     // socket->id when armed
  int fd;          // its fd number when armed
  int wake;        // this thread's wake-up eventfd (-1 if not registered)
  int slot;        // its entry in socket->waiters (-1: none was free)
  bool watch_tcp;  // the kernel socket underneath, for peer death
  bool moved;      // the connection moved to TCP (tcp_move.h): its kernel socket is what to watch
  size_t first;    // index of its doorbell in the pollfd array (then wake, then the socket)
};
// Arms the doorbells of `sockets` and re-checks them: true if one is ready already (nothing armed
// is left behind). Otherwise appends three pollfds per socket to `fds` and a watch to `watches`.
// `quiet` (optional, one per socket): events that do not count as ready for this sleeper (an
// edge-triggered epoll member's bits already reported: their level is no new edge).
bool ArmForSleep(SanSocket* const* sockets, const short* events, size_t count,
                 std::vector<pollfd>* fds, std::vector<SleepWatch>* watches,
                 const short* quiet = nullptr);
// After the poll over `fds`: consumes the doorbells that rang, notices peer death, and ends the
// watches. With `revalidate`, a socket no longer published under its fd (closed meanwhile) is
// skipped instead of touched (the caller holds the table's lifetime pin).
void FinishSleep(const std::vector<SleepWatch>& watches, const std::vector<pollfd>& fds,
                 const SocketTable* revalidate);
// The timeout for the poll after ArmForSleep: `timeout_ms`, or a short slice when a watch found no
// free wake-up slot (then nothing wakes it for other threads' progress).
int SleepTimeout(const std::vector<SleepWatch>& watches, int timeout_ms);
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
// Makes a connected socket a SAN one over `stream`, or (stream == nullptr) records why it stays
// TCP.
void Settle(SanSocket& s, std::unique_ptr<proto::Stream> stream, std::string reason);
// Gives the socket a fresh fork-holder pipe (SanSocket::holders_write); false if none could be
// made (then the holders are counted instead). Its fds are placed high, with the channel's.
bool MakeHoldersPipe(SanSocket& s);
// The client half of a SAN channel: a stream over a new endpoint of `provider`, connected to the
// rendezvous at `rendezvous` with `tuple` (the TCP connection it stands beside) as its request.
// `proof_fd` (optional): sent along for a ListenProved rendezvous (late_upgrade.h). `dialed_fd`
// (optional, owned from the call on): the rendezvous connection provider.Dial opened.
// `answer_later`: returns once the request is sent (ConnectData::answer_later); the caller takes
// the answer with the stream's endpoint().FinishConnect.
Result<std::unique_ptr<proto::Stream>> ConnectStream(fabric::Provider& provider,
                                                     const sockaddr* rendezvous, socklen_t len,
                                                     const proto::FourTuple& tuple,
                                                     int proof_fd = -1, int timeout_ms = 0,
                                                     int dialed_fd = -1, bool answer_later = false);
// Whether `fd` is a connected stream socket whose local and peer addresses are these (canonical):
// the holder of fd holds that connection's end.
bool HoldsConnection(int fd, const sockaddr_storage& local, const sockaddr_storage& peer);
// Blocks (bounded) until the peer's WAKEUP opened the window of a freshly settled SAN socket.
void WaitForWindow(SanSocket& s);
// Orders two canonical addresses (family, address bytes, port): the lower end of a connection
// listens for the SAN channel an upgrade sets up (upgrade.cc, late_upgrade.h).
bool AddressLess(const sockaddr_storage& a, const sockaddr_storage& b);
// The kernel socket's addresses in canonical form (proto::CanonicalAddress).
Result<sockaddr_storage> LocalAddress(int fd);
Result<sockaddr_storage> PeerAddress(int fd);

// Process hooks (runtime.cc).
void ShutdownAllForExit();
void NoteForkChild();

}  // namespace san
