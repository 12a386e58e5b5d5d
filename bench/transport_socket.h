// The benchmark loops for stream sockets, written once and shared by the kernel transports (tcp,
// unix) and sanlib: they differ only in how a socket is opened and which calls move the bytes.
//
// `Calls` supplies Send/Recv/Close with the POSIX signatures: KernelCalls (the libc calls) or
// SanCalls (san_send/san_recv/san_close from <san/san.h>). A template rather than function
// pointers, so the loops cost the same as if written out by hand for each.
//
// Busy polling (kSpin for kernel sockets) is done here: MSG_DONTWAIT calls retried until they move
// something. sanlib is never busy-polled from outside: its blocking calls spin for SAN_SPIN_US
// themselves, which is what is being measured.
// Thread-safety: one thread per object. Ownership: SocketConnection and SocketTransport own their
// fds and close them with Calls::Close.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include <san/san.h>

#include "transport.h"

namespace san::bench {

struct KernelCalls {
  static ssize_t Send(int fd, const void* buf, size_t len, int flags) {
    return ::send(fd, buf, len, flags);
  }
  static ssize_t Recv(int fd, void* buf, size_t len, int flags) {
    return ::recv(fd, buf, len, flags);
  }
  static int Close(int fd) { return ::close(fd); }
  static int Accept(int fd) { return ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC); }
  static int SetSockOpt(int fd, int level, int name, const void* value, socklen_t len) {
    return ::setsockopt(fd, level, name, value, len);
  }
};

struct SanCalls {
  static ssize_t Send(int fd, const void* buf, size_t len, int flags) {
    return san_send(fd, buf, len, flags);
  }
  static ssize_t Recv(int fd, void* buf, size_t len, int flags) {
    return san_recv(fd, buf, len, flags);
  }
  static int Close(int fd) { return san_close(fd); }
  static int Accept(int fd) { return san_accept(fd, nullptr, nullptr); }
  static int SetSockOpt(int fd, int level, int name, const void* value, socklen_t len) {
    return san_setsockopt(fd, level, name, value, len);
  }
};

// The client end of one stream-socket connection (the setup has been sent).
// With `push`, the sender ends every bandwidth phase by switching TCP_NODELAY on and off, which
// sends what Nagle (tcp) or combining (sanlib) still holds: otherwise the phase's last bytes wait
// for the receiver's delayed ACK (up to 40 ms on Linux) and the receiver's clock counts the wait.
template <typename Calls>
class SocketConnection : public Connection {
 public:
  SocketConnection(int fd, const Setup& setup, bool busy_poll, bool push);
  ~SocketConnection() override;
  Status PingPong(uint64_t count, PingPongResult* out) override;
  Status Stream(uint64_t count, StreamResult* out) override;

 private:
  const int fd_;
  const Setup setup_;
  const bool busy_poll_;
  const bool push_;
};

// Listening, accepting and serving, with the socket-specific parts left to subclasses.
template <typename Calls>
class SocketTransport : public Transport {
 public:
  explicit SocketTransport(bool busy_poll) : busy_poll_(busy_poll) {}
  ~SocketTransport() override;
  Result<std::string> Listen() override;
  Result<bool> Serve() override;
  Result<std::unique_ptr<Connection>> Connect(const std::string& address,
                                              const Setup& setup) override;

 protected:
  // A listening socket; `address` is what OpenClient will be given.
  virtual Result<int> OpenListener(std::string* address) = 0;
  // A socket connected to `address`, with the setup's options applied.
  virtual Result<int> OpenClient(const std::string& address, const Setup& setup) = 0;
  // Options on an accepted socket once its setup is known; checks the connection is what it
  // should be (sanlib: accelerated, not fallen back to TCP).
  virtual Status ConfigureAccepted(int fd, const Setup& setup) = 0;
  // Whether TCP_NODELAY means something here (tcp, sanlib; not unix).
  virtual bool HasNoDelay() const = 0;

 private:
  const bool busy_poll_;
  int listen_fd_ = -1;
};

// Moving whole buffers over a stream socket (shared by the client and server loops).
template <typename Calls>
class SocketIo {
 public:
  SocketIo(int fd, bool busy_poll) : fd_(fd), flags_(busy_poll ? MSG_DONTWAIT : 0) {}
  Status SendAll(const void* buf, size_t len);
  // Exactly `len` bytes. EOF before the first byte sets *eof (if given) and returns ok; EOF later
  // is ECONNRESET.
  Status RecvAll(void* buf, size_t len, bool* eof = nullptr);
  // At least one byte (up to `len`); 0 at EOF.
  Result<size_t> RecvSome(void* buf, size_t len);

 private:
  const int fd_;
  const int flags_;
};

extern template class SocketConnection<KernelCalls>;
extern template class SocketConnection<SanCalls>;
extern template class SocketTransport<KernelCalls>;
extern template class SocketTransport<SanCalls>;

}  // namespace san::bench
