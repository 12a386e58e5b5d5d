/* <san/san.h> -- the public C API of libsan: SAN stream sockets.
 *
 * A SAN socket is a real kernel TCP socket (its identity: addresses, fd passing, liveness) with a
 * kernel-bypass channel set up beside it when both ends use sanlib: shared memory inside one host,
 * RDMA (libibverbs) between hosts where an RDMA device reaches the peer.
 * If the peer is not SAN-capable, or set-up fails, the socket stays plain kernel TCP (fallback) and
 * still works; san_getinfo() says which mode it is in and why.
 *
 * Calls mirror their POSIX namesakes: same arguments, -1 with errno on failure, the same errno the
 * kernel would give for the same situation. Socket descriptors are kernel fds, so close() is wrong
 * for them: use san_close(). Thread-safety: concurrent calls on different sockets are safe; on one
 * socket, one reader and one writer may run at once.
 */
#ifndef SAN_SAN_H
#define SAN_SAN_H

#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The socket type for san_socket(): a stream socket that is SAN-capable. SOCK_STREAM is accepted
 * as a synonym. SOCK_NONBLOCK and SOCK_CLOEXEC may be or-ed in. */
#define SOCK_SAN 0x5a

int san_socket(int domain, int type, int protocol);
int san_bind(int fd, const struct sockaddr* addr, socklen_t len);
int san_listen(int fd, int backlog);
int san_accept(int fd, struct sockaddr* addr, socklen_t* len);
int san_accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags);
int san_connect(int fd, const struct sockaddr* addr, socklen_t len);

ssize_t san_send(int fd, const void* buf, size_t len, int flags);
ssize_t san_recv(int fd, void* buf, size_t len, int flags);
ssize_t san_read(int fd, void* buf, size_t len);
ssize_t san_write(int fd, const void* buf, size_t len);
ssize_t san_readv(int fd, const struct iovec* iov, int iovcnt);
ssize_t san_writev(int fd, const struct iovec* iov, int iovcnt);

/* File transfer without a buffer of the caller's in between.
 * san_recvfile: receives up to count bytes from SAN socket sock and writes them to out_fd straight
 * from the channel's receive buffers (one copy). offset != NULL: written at *offset with pwrite,
 * which is advanced; NULL: at out_fd's file position. Returns the bytes moved (>= 1, possibly
 * fewer than count, as recv), 0 at EOF, or -1 with errno: the socket's errors as recv reports them,
 * or the write's (ENOSPC, EFBIG, EIO...) -- then the bytes the file did not take stay queued in
 * the socket for the next recv/san_recvfile. Blocks, or not (EAGAIN), as recv on the socket does.
 * san_sendfile: sendfile(2) to a socket (the same arguments, results and offset rules). Both work
 * on any socket; on plain kernel TCP they use the kernel socket. */
ssize_t san_recvfile(int sock, int out_fd, off_t* offset, size_t count);
ssize_t san_sendfile(int sock, int in_fd, off_t* offset, size_t count);

int san_shutdown(int fd, int how);
int san_close(int fd);

int san_getsockopt(int fd, int level, int name, void* value, socklen_t* len);
int san_setsockopt(int fd, int level, int name, const void* value, socklen_t len);
int san_getsockname(int fd, struct sockaddr* addr, socklen_t* len);
int san_getpeername(int fd, struct sockaddr* addr, socklen_t* len);
/* F_GETFL / F_SETFL (O_NONBLOCK), F_GETFD / F_SETFD. */
int san_fcntl(int fd, int cmd, ... /* int arg */);
/* poll() over a mix of SAN sockets and any other fds. */
int san_poll(struct pollfd* fds, nfds_t nfds, int timeout_ms);
/* epoll over a mix of SAN sockets and any other fds. The epoll fd is a kernel epoll instance: fds
 * that are not SAN connections are registered with the kernel unchanged. Events, flags (EPOLLET,
 * EPOLLONESHOT, EPOLLEXCLUSIVE, ...) and errors are epoll's; san_epoll_pwait's sigmask may be
 * NULL. Close the epoll fd with san_close(). */
int san_epoll_create1(int flags);
int san_epoll_ctl(int epfd, int op, int fd, struct epoll_event* event);
int san_epoll_wait(int epfd, struct epoll_event* events, int max_events, int timeout_ms);
int san_epoll_pwait(int epfd, struct epoll_event* events, int max_events, int timeout_ms,
                    const sigset_t* sigmask);

/* Upgrades an established kernel TCP connection whose two ends both call san_upgrade(), negotiated
 * in band (both sides must have no unread data in flight). On success the fd becomes a SAN socket;
 * if the peer declines or cannot, returns -1 with errno ENOTSUP and the fd stays plain TCP. */
int san_upgrade(int fd);

/* Is fd a socket managed by sanlib (1) or not (0)? */
int san_is_socket(int fd);

enum san_mode { SAN_MODE_NONE = 0, SAN_MODE_TCP = 1, SAN_MODE_SHM = 2, SAN_MODE_VERBS = 3 };

struct san_info {
  int mode;          /* enum san_mode: the data path this socket uses now */
  char fallback[96]; /* why it is TCP, "" if accelerated or not yet connected */
  uint64_t bytes_sent;
  uint64_t bytes_received;
  uint32_t window; /* send credits currently available */
  uint32_t mtu;
};
int san_getinfo(int fd, struct san_info* info);

#ifdef __cplusplus
}
#endif

#endif /* SAN_SAN_H */
