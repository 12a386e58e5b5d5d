#include "sanlib/socket/late_counts.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>

#include <cstddef>

#include "sanlib/common/kernel.h"

namespace san {
namespace {

bool ReadTcpInfo(int fd, tcp_info* ti) {
  socklen_t len = sizeof *ti;
  return kernel::getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0 &&
         len >= offsetof(tcp_info, tcpi_bytes_received) + sizeof ti->tcpi_bytes_received;
}

// A counter of TCP_INFO plus the queue `request` reports (SIOCOUTQ, SIOCINQ), read consistently:
// the queue is read around the counter until it holds still, so a segment or an ACK in between
// cannot skew the pair. Returns counter + queue * sign.
template <typename Counter>
Result<uint64_t> CounterAndQueue(int fd, unsigned long request, Counter counter, int sign) {
  for (int i = 0; i < 16; ++i) {
    int before = 0, after = 0;
    tcp_info ti{};
    if (kernel::ioctl(fd, request, &before) != 0) return Status::FromErrno("ioctl(queue)");
    if (!ReadTcpInfo(fd, &ti)) return Status(ENOTSUP, "TCP_INFO");
    if (kernel::ioctl(fd, request, &after) != 0) return Status::FromErrno("ioctl(queue)");
    if (before == after) return counter(ti) + static_cast<uint64_t>(sign * int64_t{after});
  }
  return Status(EAGAIN, "a socket queue never held still");
}

// Whether the peer's FIN has arrived (TCP_INFO's state; the numbers of netinet/tcp.h's states,
// which cannot be included beside linux/tcp.h).
bool FinReceived(const tcp_info& ti) {
  constexpr uint8_t kTimeWait = 6, kCloseWait = 8, kLastAck = 9, kClosing = 11;
  const uint8_t state = ti.tcpi_state;
  return state == kCloseWait || state == kLastAck || state == kClosing || state == kTimeWait;
}

}  // namespace

Result<uint64_t> KernelBytesWritten(int fd, bool active) {
  return CounterAndQueue(
      fd, SIOCOUTQ, [&](const tcp_info& ti) { return ti.tcpi_bytes_acked - (active ? 1 : 0); }, 1);
}

// Without the FIN's correction: a peer that switched and was then killed sent its FIN after its
// wake byte; the count one too high read as "unseen reads", the move failed, and the wake byte
// went to the program as data.
Result<uint64_t> KernelBytesConsumed(int fd) {
  return CounterAndQueue(
      fd, SIOCINQ,
      [](const tcp_info& ti) { return ti.tcpi_bytes_received - (FinReceived(ti) ? 1 : 0); }, -1);
}

}  // namespace san
