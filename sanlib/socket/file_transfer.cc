// san_recvfile / san_sendfile (file_transfer.h).
#include "sanlib/socket/file_transfer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <span>

#include "sanlib/common/kernel.h"
#include "sanlib/socket/drive.h"

namespace san {
namespace {

// Bounce buffer for the kernel socket's receive path: one per thread, made on first use.
constexpr size_t kBounce = 256 * 1024;
std::byte* Bounce() {
  static thread_local std::unique_ptr<std::byte[]> buffer;
  if (!buffer) buffer.reset(new std::byte[kBounce]);
  return buffer.get();
}

// One write of `pieces` to the file: at *offset (advanced) with pwritev, else at its position.
// (Raw system calls: under the compatibility layer, libc's would pass through its interposers.
// pwritev takes the offset as two longs; on 64-bit the high one is ignored.)
ssize_t WriteOut(int fd, off_t* offset, std::span<const iovec> pieces) {
  const auto n = static_cast<long>(pieces.size());
  if (!offset) return Syscall(SYS_writev, fd, pieces.data(), n);
  const ssize_t w = Syscall(SYS_pwritev, fd, pieces.data(), n, static_cast<long>(*offset), 0L);
  if (w > 0) *offset += w;
  return w;
}

// Lent pieces per write: 16 packets, 512 KiB at the default MTU (one write(2) per packet cost
// about a tenth of a 145 MB receive into tmpfs).
constexpr size_t kPiecesPerWrite = 16;

// The kernel socket's way: peek, write what the file takes, then consume exactly that, so bytes
// the file refused stay queued in the socket (nothing is lost to a full disk).
// (Through RecvIov, which carries a kernel socket that may still move to shm, late_upgrade.h,
// and the peer's TCP bytes after such a move.)
ssize_t KernelRecvToFile(int sock, int out_fd, off_t* offset, size_t count, int flags) {
  std::byte* buf = Bounce();
  const iovec peek{buf, std::min(count, kBounce)};
  const ssize_t got = RecvIov(sock, &peek, 1, MSG_PEEK | flags);
  if (got <= 0) return got;
  const iovec piece{buf, static_cast<size_t>(got)};
  const ssize_t wrote = WriteOut(out_fd, offset, std::span<const iovec>(&piece, 1));
  if (wrote <= 0) return wrote == 0 ? (errno = EIO, -1) : -1;
  // The bytes are queued (we peeked them) and this is their only reader: this takes them at once.
  // MSG_TRUNC: TCP drops them without copying them out again (a third copy: the kernel-TCP path
  // cost 3 copies per byte instead of recv + write's 2); other stream sockets ignore the flag
  // and copy into buf, as before.
  const iovec take{buf, static_cast<size_t>(wrote)};
  const ssize_t taken = RecvIov(sock, &take, 1, MSG_DONTWAIT | MSG_TRUNC);
  return taken == wrote ? wrote : (errno = EIO, -1);
}

}  // namespace

ssize_t RecvToFile(int sock, int out_fd, off_t* offset, size_t count) {
  SanSocket* s = ShmSocket(sock);
  if (!s || InflowPending(*s)) return KernelRecvToFile(sock, out_fd, offset, count, 0);
  if (count == 0) return 0;
  // As RecvIov: after shutdown(SHUT_RD) an empty queue reads as EOF instead of blocking.
  const bool read_shut = s->read_shut.load();
  const bool nonblocking = read_shut || s->nonblocking.load(std::memory_order_relaxed);
  size_t total = 0;
  CallDeadline deadline;
  iovec room[kPiecesPerWrite];
  for (;;) {
    std::span<const iovec> lent;
    size_t lent_bytes = 0;
    // The first loan waits like recv(); later ones only take what is already queued.
    Result<size_t> r = Drive(*s, false, nonblocking || total > 0, &deadline, [&] {
      Result<std::span<const iovec>> b = s->stream->Borrow(count - total, room);
      if (!b.ok()) return AfterMove(*s, Result<size_t>(b.status()));
      lent = b.value();
      lent_bytes = 0;
      for (const iovec& piece : lent) lent_bytes += piece.iov_len;
      return Result<size_t>(lent_bytes);
    });
    if (MovedOn(r)) {
      const ssize_t n = KernelRecvToFile(sock, out_fd, offset, count - total,
                                         read_shut || total > 0 ? MSG_DONTWAIT : 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && (read_shut || total > 0)) {
        return static_cast<ssize_t>(total);
      }
      return KernelRest(static_cast<ssize_t>(total), n);
    }
    if (!r.ok()) return RecvFailed(*s, total, r.status().code(), read_shut);
    if (r.value() == 0) return static_cast<ssize_t>(total);  // EOF
    // Outside the stream's lock: the loan keeps the bytes where they are until GiveBack.
    const ssize_t wrote = WriteOut(out_fd, offset, lent);
    const int write_errno = errno;
    s->stream->GiveBack(wrote > 0 ? static_cast<size_t>(wrote) : 0);
    WakeSleepers(*s);  // a reader that found the bytes lent may go on
    if (wrote <= 0) {
      if (total > 0) return static_cast<ssize_t>(total);  // the error shows on the next call
      errno = wrote == 0 ? EIO : write_errno;
      return -1;
    }
    total += static_cast<size_t>(wrote);
    if (static_cast<size_t>(wrote) < lent_bytes || total == count) {
      return static_cast<ssize_t>(total);
    }
  }
}

ssize_t SendFromFile(int sock, int in_fd, off_t* offset, size_t count) {
  bool on_tcp = false;
  SanSocket* s = DataSocket(sock, &on_tcp);
  if (!s) return kernel::sendfile(sock, in_fd, offset, count);
  if (on_tcp) {
    const ssize_t n = LateKernelSendFile(*s, in_fd, offset, count);
    if (n < 0 && errno != kLateSwitched) return n;
    if (n >= 0) {
      // A blocking bulk sendfile whose socket switched after a part: the rest goes over the
      // stream (from the position the kernel's part left).
      if (static_cast<size_t>(n) == count || s->nonblocking.load(std::memory_order_relaxed) ||
          s->mode.load(std::memory_order_acquire) != SocketMode::kShm) {
        return n;
      }
      const ssize_t more = SendFromFile(sock, in_fd, offset, count - static_cast<size_t>(n));
      return more > 0 ? n + more : n;
    }
  }
  // The file is read at an explicit position, so a partial send (nonblocking, interrupted) leaves
  // the position just past what was sent, as the kernel's sendfile does. Files that cannot pread
  // (pipes, sockets) get EINVAL, as from sendfile.
  const off_t pos = offset ? *offset : ::lseek(in_fd, 0, SEEK_CUR);
  if (pos < 0) {
    if (errno == ESPIPE) errno = EINVAL;
    return -1;
  }
  const bool nonblocking = s->nonblocking.load(std::memory_order_relaxed);
  size_t sent = 0;
  int error = 0;
  bool may_wait_for_disk = false;  // the next read may block the stream (the bytes were read ahead)
  CallDeadline deadline;
  while (sent < count) {
    int file_error = 0;
    // Each packet's worth waits for the window like send() (nonblocking: EAGAIN).
    Result<size_t> r = Drive(*s, true, nonblocking, &deadline, [&] {
      return AfterMove(*s, s->stream->SendFile(in_fd, pos + static_cast<off_t>(sent), count - sent,
                                               !may_wait_for_disk, &file_error));
    });
    if (MovedOn(r)) {
      off_t at = pos + static_cast<off_t>(sent);
      const ssize_t done =
          KernelRest(static_cast<ssize_t>(sent), kernel::sendfile(sock, in_fd, &at, count - sent));
      if (done < 0) error = errno;
      sent = done < 0 ? 0 : static_cast<size_t>(done);
      break;
    }
    if (!r.ok()) {  // the connection's error, EAGAIN (nonblocking, SO_SNDTIMEO) or EINTR
      if (sent == 0) {
        error = r.status().code();
        if (error != EAGAIN && error != EINTR) error = ConnectionErrno(*s, error, true);
      }
      break;
    }
    sent += r.value();
    if (file_error == EAGAIN) {
      // Not in the page cache: read it in without holding the stream, then read it for real.
      ::readahead(in_fd, pos + static_cast<off_t>(sent), std::min<size_t>(count - sent, 1u << 20));
      may_wait_for_disk = true;
      continue;
    }
    may_wait_for_disk = false;
    if (file_error != 0) {
      if (sent == 0) error = file_error;  // else it shows on the next call, as a read's would
      break;
    }
    if (r.value() == 0 || nonblocking) break;  // end of file, or all a nonblocking call takes
  }
  if (offset) {
    *offset = pos + static_cast<off_t>(sent);
  } else {
    ::lseek(in_fd, pos + static_cast<off_t>(sent), SEEK_SET);
  }
  if (sent == 0 && error) {
    // sendfile raises SIGPIPE like write.
    if (error == EPIPE) raise(SIGPIPE);
    errno = error;
    return -1;
  }
  return static_cast<ssize_t>(sent);
}

}  // namespace san
