// Where a late move's TCP part ends: the kernel's own counts of the bytes an application wrote to
// and consumed from a TCP socket (docs/sockets.md, "Where TCP ends"). Each end of a late upgrade
// reads both at its switch (late_upgrade.cc TrySwitch) and sends the written count in its WAKEUP.
//
// Thread-safety: stateless. A count is read consistently against segments and ACKs that arrive
// meanwhile: the socket's queue is read around the TCP_INFO counter until it holds still.
#pragma once

#include <cstdint>

#include "sanlib/common/status.h"

namespace san {

// Bytes written to the socket so far: acknowledged (TCP_INFO tcpi_bytes_acked) + still queued
// (SIOCOUTQ). `active`: the socket was connect()ed, and its acknowledged count includes its SYN.
Result<uint64_t> KernelBytesWritten(int fd, bool active);

// Bytes consumed from the socket so far: received (tcpi_bytes_received) - still queued
// (SIOCINQ), less one once the peer's FIN has come: the kernel counts the FIN among the bytes
// received, and SIOCINQ leaves it out.
Result<uint64_t> KernelBytesConsumed(int fd);

}  // namespace san
