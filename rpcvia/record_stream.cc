#include "rpcvia/record_stream.h"

#include <poll.h>
#include <san/san.h>

#include <cerrno>

#include "sanlib/common/clock.h"

namespace san::rpcvia {

RecordStream::RecordStream(int fd, u_int send_size, u_int recv_size) : fd_(fd) {
  xdrrec_create(&xdr_, send_size, recv_size, this, &RecordStream::ReadRecordBytes,
                &RecordStream::WriteRecordBytes);
}

RecordStream::~RecordStream() { XDR_DESTROY(&xdr_); }

void RecordStream::ClearError() {
  error_ = RPC_SUCCESS;
  error_errno_ = 0;
}

void RecordStream::Fail(enum clnt_stat status, int err) {
  error_ = status;
  error_errno_ = err;
  if (status != RPC_TIMEDOUT) dead_ = true;
}

bool RecordStream::Wait(short events, enum clnt_stat on_timeout) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline_ns_ != kNoDeadline) {
      const uint64_t now = NowNs();
      if (now >= deadline_ns_) {
        Fail(on_timeout, ETIMEDOUT);
        return false;
      }
      timeout_ms = static_cast<int>((deadline_ns_ - now + 999999) / 1000000);
    }
    pollfd p{fd_, events, 0};
    const int rc = san_poll(&p, 1, timeout_ms);
    if (rc > 0) return true;  // ready, or an error the next read/write reports with its errno
    if (rc < 0 && errno != EINTR) {
      Fail(on_timeout == RPC_TIMEDOUT ? RPC_CANTRECV : on_timeout, errno);
      return false;
    }
  }
}

// xdrrec's input callback: at least one byte, or -1 (xdrrec then fails the decode).
int RecordStream::ReadRecordBytes(void* self, void* buf, int len) {
  auto* s = static_cast<RecordStream*>(self);
  if (len <= 0) return 0;
  for (;;) {
    const ssize_t n = san_recv(s->fd_, buf, static_cast<size_t>(len), MSG_DONTWAIT);
    if (n > 0) return static_cast<int>(n);
    if (n == 0) {
      s->Fail(RPC_CANTRECV, ECONNRESET);  // the peer closed mid-conversation
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      s->Fail(RPC_CANTRECV, errno);
      return -1;
    }
    if (!s->Wait(POLLIN, RPC_TIMEDOUT)) return -1;
  }
}

// xdrrec's output callback: all `len` bytes, or -1.
int RecordStream::WriteRecordBytes(void* self, void* buf, int len) {
  auto* s = static_cast<RecordStream*>(self);
  const char* p = static_cast<const char*>(buf);
  int left = len;
  while (left > 0) {
    const ssize_t n = san_send(s->fd_, p, static_cast<size_t>(left), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      left -= static_cast<int>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      s->Fail(RPC_CANTSEND, errno);
      return -1;
    }
    if (!s->Wait(POLLOUT, RPC_TIMEDOUT)) return -1;
  }
  return len;
}

}  // namespace san::rpcvia
