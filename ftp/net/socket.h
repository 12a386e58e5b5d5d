// The FTP programs' one door to the network: SAN sockets (<san/san.h>) with timeouts.
//
// Every control and data connection of ftpd and ftp_client is a Socket: made by san_socket,
// san_listen/san_accept or san_connect, moved with san_send/san_recv, waited on with san_poll,
// closed with san_close. A SAN socket accelerates itself when the peer is a sanlib program on this
// host and stays plain TCP otherwise; Mode() says which. A Socket may also wrap a kernel socket
// the process inherited (inetd's fd 0): san_* calls pass kernel fds through, and Upgrade() can
// turn it into a SAN connection.
// Thread-safety: one owner; not shared between threads. Ownership: closes its fd exactly once.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <string>
#include <utility>

#include "ftp/protocol/address.h"
#include "sanlib/common/connection_errno.h"
#include "sanlib/common/status.h"

namespace san::ftp {

// Status::call() of a transfer step that failed on the local file rather than the network
// (ENOSPC, EFBIG, EIO, ... of RecvToFile's write, or of a read of the file being sent).
inline constexpr char kLocalFileCall[] = "local file";

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      Close();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  // A listening SAN socket on addr (port 0: any), backlog as given.
  static Result<Socket> Listen(const HostPort& addr, int backlog);
  // Connects to addr within timeout_ms; bind_addr (port 0 or given) if non-null.
  static Result<Socket> Connect(const HostPort& addr, int timeout_ms,
                                const HostPort* bind_addr = nullptr);

  // Waits up to timeout_ms (-1: forever) for a connection; kAgain status on timeout.
  Result<Socket> Accept(int timeout_ms, HostPort* peer = nullptr) const;
  // Sends all of data, each wait bounded by timeout_ms. ETIMEDOUT on a stalled peer.
  Status SendAll(const void* data, size_t len, int timeout_ms) const;
  Status SendAll(const std::string& s, int timeout_ms) const {
    return SendAll(s.data(), s.size(), timeout_ms);
  }
  // Receives up to len bytes (0: orderly EOF) within timeout_ms; ETIMEDOUT otherwise.
  Result<size_t> Recv(void* buf, size_t len, int timeout_ms) const;
  // Receives up to len bytes (0: orderly EOF) in one blocking call, bounded by the socket's receive
  // timeout (SetReceiveTimeout; ETIMEDOUT when it passes). Unlike Recv this sleeps inside
  // san_recv, which is what lets sanlib offer the buffer to the sender as a single-copy window
  // (SAN_SINGLE_COPY): the sender then writes straight into buf. The socket must be blocking.
  // EINTR status when a signal interrupts the wait (the caller decides whether to go on).
  Result<size_t> RecvWaiting(void* buf, size_t len) const;
  // SO_RCVTIMEO: how long one RecvWaiting may wait (ms > 0).
  Status SetReceiveTimeout(int timeout_ms) const;
  // One nonblocking send / receive: bytes moved, 0 when it would block (RecvSome: kAgain status
  // when it would block, 0 bytes for EOF).
  Result<size_t> SendSome(const void* data, size_t len) const;
  Result<size_t> RecvSome(void* buf, size_t len) const;
  // san_sendfile: up to len bytes of file_fd from *offset, which is advanced by what was sent (the
  // fd's own position is not used). On kernel TCP that is the kernel's sendfile(2) (no copy in
  // user space); on a SAN connection sanlib reads the file into the channel. The socket should be
  // nonblocking (SetNonBlocking) so the caller keeps control (ABOR, timeouts). Bytes sent (maybe
  // fewer than len); 0 when *offset is at or past the file's end (also a file that shrank); kAgain
  // status when the socket would block; EINTR status on a signal; a failure of the file (EIO,
  // EINVAL, ...) as call() == kLocalFileCall, of the connection (EPIPE, ECONNRESET, ...)
  // otherwise (IsConnectionErrno).
  Result<size_t> SendFile(int file_fd, off_t* offset, size_t len) const;
  // san_recvfile: receives up to len bytes into file_fd at its position (advanced), straight from
  // the SAN channel's receive buffers (one copy, no buffer of ours; recv + write on plain TCP).
  // Bytes moved, 0 at EOF; kAgain status when it would block (O_NONBLOCK) or SO_RCVTIMEO passed;
  // EINTR status on a signal; a failure of the file as call() == kLocalFileCall (its bytes stay
  // queued in the socket).
  Result<size_t> RecvToFile(int file_fd, size_t len) const;
  // O_NONBLOCK on or off (for calls without a MSG_DONTWAIT: RecvToFile).
  Status SetNonBlocking(bool on) const;
  // Is something readable now (data, EOF or error)?
  bool Readable(int timeout_ms) const;
  // Can a send make progress (or fail) within timeout_ms?
  bool Writable(int timeout_ms) const;

  HostPort LocalAddress() const;
  HostPort PeerAddress() const;
  // "shm", "tcp (reason)" or "kernel" for a socket sanlib does not manage.
  std::string Mode() const;
  bool Accelerated() const;
  // In-band upgrade of an established connection (san_upgrade).
  Status Upgrade() const;

  // TCP_NODELAY: for the control connection, where every write is a whole reply or command and
  // a reply must not wait for the ACK of the previous one. Without it, two small writes in a row
  // (the in-band upgrade's) meet the peer's delayed ACK: 40 ms of nothing per session.
  void SetNoDelay() const;
  void ShutdownWrite() const;
  // SO_LINGER 0: Close() then resets the connection instead of ending it with a FIN, so a peer
  // that receives an upload sees a broken transfer, not a complete one (ftp_client's abort).
  void ResetOnClose() const;
  void Close();
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// Waits up to timeout_ms until `a` has any of a_events or `b` is readable (san_poll over both).
// Returns 0 on timeout, -1 on error, else sets *a_ready / *b_ready.
int WaitEither(const Socket& a, short a_events, const Socket& b, int timeout_ms, bool* a_ready,
               bool* b_ready);

// Ignore SIGPIPE process-wide (a peer that goes away must give EPIPE, not kill us).
void IgnoreSigpipe();

}  // namespace san::ftp
