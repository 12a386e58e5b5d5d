// conn-bench: the two transports a connection benchmark compares, behind one table of calls.
//
// `san` is sanlib through its public C API (<san/san.h>, SOCK_SAN sockets: shared memory when both
// ends are sanlib on this host); `tcp` is the kernel's TCP through the plain POSIX calls. The
// workloads are written once against Calls, so the two differ in nothing but the calls they make.
// A process that only ever uses the tcp table never calls into sanlib (so sanlib never starts its
// threads there). The tables are constants: thread-safe.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace san::connbench {

struct Calls {
  const char* name;  // "san" or "tcp"
  int socket_type;   // SOCK_SAN or SOCK_STREAM
  int (*socket)(int domain, int type, int protocol);
  int (*bind)(int fd, const sockaddr* addr, socklen_t len);
  int (*listen)(int fd, int backlog);
  int (*accept)(int fd, sockaddr* addr, socklen_t* len);
  int (*connect)(int fd, const sockaddr* addr, socklen_t len);
  ssize_t (*send)(int fd, const void* buf, size_t len, int flags);
  ssize_t (*recv)(int fd, void* buf, size_t len, int flags);
  int (*close)(int fd);
  int (*setsockopt)(int fd, int level, int name, const void* value, socklen_t len);
  int (*getsockname)(int fd, sockaddr* addr, socklen_t* len);
  int (*poll)(pollfd* fds, nfds_t nfds, int timeout_ms);
  int (*epoll_create1)(int flags);
  int (*epoll_ctl)(int epfd, int op, int fd, epoll_event* event);
  int (*epoll_wait)(int epfd, epoll_event* events, int max_events, int timeout_ms);
};

// The table for "san" or "tcp"; nullptr for any other name.
const Calls* FindCalls(const std::string& name);

// The data path of a connected socket: "shm", "verbs" or "tcp" (always "tcp" for the tcp table).
// For san, `why` (may be null) receives san_getinfo's fallback reason when the mode is tcp.
std::string ConnectionMode(const Calls& calls, int fd, std::string* why);

// 127.0.0.1:port.
sockaddr_in Loopback(uint16_t port);

// A listening socket on 127.0.0.1, an ephemeral port (written to *port). -1 with errno on failure.
int OpenListener(const Calls& calls, int backlog, uint16_t* port);

}  // namespace san::connbench
