// RecordStream: an XDR record stream (RFC 5531 §11 record marking, libtirpc's xdrrec) over one
// sanlib socket, for the via client and server transports.
//
// The socket is nonblocking; reads and writes wait (san_poll: spin, then sleep on the doorbell)
// until a deadline the owner sets per call, so a call times out with RPC_TIMEDOUT instead of
// hanging on a silent peer. What went wrong last (status + errno) is kept for rpc_err.
// Ownership: does not own the fd. Not movable (libtirpc keeps a pointer to it).
// Thread-safety: one thread at a time (the transports serialise their calls).
#pragma once

#include <rpc/rpc.h>

#include <cstdint>

namespace san::rpcvia {

class RecordStream {
 public:
  static constexpr uint64_t kNoDeadline = UINT64_MAX;

  // `fd` must be a connected SAN socket in O_NONBLOCK mode. Buffer sizes 0 = libtirpc's default.
  RecordStream(int fd, u_int send_size, u_int recv_size);
  ~RecordStream();
  RecordStream(const RecordStream&) = delete;
  RecordStream& operator=(const RecordStream&) = delete;

  XDR* xdr() { return &xdr_; }
  int fd() const { return fd_; }

  // Absolute CLOCK_MONOTONIC nanoseconds (san::NowNs) after which a wait gives up.
  void set_deadline(uint64_t deadline_ns) { deadline_ns_ = deadline_ns; }
  // RPC_SUCCESS until a read or write fails: RPC_TIMEDOUT, RPC_CANTRECV or RPC_CANTSEND; errno in
  // error_errno() (ECONNRESET for a peer that closed).
  enum clnt_stat error() const { return error_; }
  int error_errno() const { return error_errno_; }
  void ClearError();
  // The peer closed or the connection broke (a later call cannot succeed).
  bool dead() const { return dead_; }
  // For a transport that gives up on the connection (a request that does not decode).
  void set_dead() { dead_ = true; }

 private:
  static int ReadRecordBytes(void* self, void* buf, int len);
  static int WriteRecordBytes(void* self, void* buf, int len);
  // Waits for `events` until the deadline; false (with the error set) if it passed or poll failed.
  bool Wait(short events, enum clnt_stat on_timeout);
  void Fail(enum clnt_stat status, int err);

  int fd_;
  XDR xdr_{};
  uint64_t deadline_ns_ = kNoDeadline;
  enum clnt_stat error_ = RPC_SUCCESS;
  int error_errno_ = 0;
  bool dead_ = false;
};

}  // namespace san::rpcvia
