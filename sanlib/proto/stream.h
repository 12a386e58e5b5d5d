// Stream: one SAN connection's protocol engine (SOVIA's stream protocol) over a fabric Endpoint.
//
// It turns byte-stream operations into packets and back: DATA split at the MTU, the sliding window
// and delayed/piggybacked ACKs (flow_control.h), small-message combining (combiner.h), the FIN
// handshake (close_state.h), the WAKEUP exchange, and the checks on everything the peer sends
// (sequence numbers, lengths, credits, buffer ids) -- any violation aborts the connection, never
// more: this side's sticky error is EPROTO (the socket layer reports it as ECONNRESET), the peer
// sees ECONNRESET, and nothing that arrived behind the violating packet is delivered. (A break
// that is not a violation still delivers everything that had landed before it.)
//
// Progress is made by whichever thread calls in (SOVIA-SINGLE); nothing here sleeps: "would
// block" is Status EAGAIN, and the socket layer decides whether to spin or sleep on the doorbell.
// The one wait is a zero-copy Send's, for the provider to complete its sends (see Send).
//
// Where state lives: every mutable field is in a StreamShared block (stream/state.h: one part per
// concern, each with its invariants) in an anonymous MAP_SHARED mapping of its own (not in the
// endpoint's buffers, which the peer can write), and the receive and staging buffers are the
// endpoint's shared memory, so a fork() child that inherits the connection sees exactly what the
// parent sees. The Stream object only holds pointers and constants. The implementation is one
// file per concern (stream/locked.h lists them).
//
// Thread-safety: every public method takes the stream's process-shared lock; any number of threads
// (and processes, after fork) may call concurrently. Ownership: owns the Endpoint.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sanlib/common/status.h"
#include "sanlib/fabric/provider.h"
#include "sanlib/proto/close_state.h"
#include "sanlib/proto/combiner.h"

namespace san::proto {

struct StreamParams {
  uint32_t window = 32;         // w: DATA packets the peer may have in flight towards us
  uint32_t ack_threshold = 16;  // t
  uint32_t mtu = 32768;         // our receive buffer size: the largest DATA payload we accept
  CombinePolicy combine;
  uint32_t combine_timer_us = 200;
  // Sends from the application's memory (docs/protocol.md "Large messages over verbs"; needs the
  // provider's kCapRegisteredSend): a Send whose first buffer holds at least this many bytes, with
  // at least as much window open, posts its DATA packets from that buffer in place instead of
  // copying it into a staging slot. 0 = never.
  uint32_t zero_copy_min = 0;

  // P: SOVIA's w + w/t + 1 (the window's DATA, then w/t ACKs and the FIN, the ack reserve the
  // WAKEUP announces), plus one receive for a MOVE or MOVED (at most one each way, ever).
  uint32_t receive_depth() const { return window + window / ack_threshold + 2; }
};

// Moving a connection to its kernel TCP socket (an exec into an image without sanlib, docs/
// compat.md "exec"; the packets and the header are in wire.h). The mover posts MOVE and waits for
// the peer's MOVED: after those two packets nothing more crosses SAN in either direction, and
// everything the peer had sent has landed here. The mover then writes a MoveHeader on the kernel
// socket, followed by the peer's bytes it had received but not delivered (`returned`) and its own
// combined bytes never posted; the peer, after delivering what its SAN queue still holds, sends
// the returned bytes back over TCP (the relay) ahead of anything new, then its own unposted
// bytes, and from then on both sides are plain TCP at the same byte offsets.
//
// The status Send and Recv return once a call must go to the kernel socket instead (never a
// connection error: the socket layer turns to the kernel socket).
constexpr int kMovedToTcp = EXDEV;

// What the mover's kernel socket must carry, in this order, after the MoveHeader.
struct TcpHandover {
  std::vector<std::byte> returned;  // the peer's bytes we received and did not deliver
  std::vector<std::byte> unsent;    // our combined bytes that were never posted
  bool fin = false;                 // we had shut down writing: shut the kernel socket too
};

// The kernel socket, for the relay: nonblocking calls, -1 with errno on failure (EAGAIN: not now).
class RelayIo {
 public:
  virtual ~RelayIo() = default;
  virtual ssize_t Peek(void* buf, size_t n) = 0;  // copies without consuming; 0 at EOF
  virtual ssize_t Consume(void* buf, size_t n) = 0;
  virtual ssize_t Write(const void* buf, size_t n) = 0;
  virtual int ShutdownWrite() = 0;
};

// What poll() would report, from the stream's own state.
struct Readiness {
  bool readable = false;          // data queued, or EOF, or error
  bool writable = false;          // a send would accept at least one byte now
  bool peer_closed = false;       // FIN received (POLLRDHUP)
  bool write_closed = false;      // we sent FIN (shutdown-write or close)
  int error = 0;                  // sticky connection error (ECONNRESET, EPROTO...), 0 if none
  bool moved = false;             // MOVE went either way: the kernel socket carries what follows
  uint64_t packets_received = 0;  // StreamStats::packets_received at this look
  uint64_t version = 0;           // Version() once this look released the lock
};

struct StreamStats {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t packets_sent = 0;
  uint64_t packets_received = 0;
  uint64_t explicit_acks_sent = 0;
  uint32_t credits = 0;
  uint32_t window = 0;
  uint32_t mtu = 0;
  ClosePhase phase = ClosePhase::kOpen;
  // Single copy (docs/protocol.md "Single copy").
  bool single_copy_out = false;  // we may write into the peer's windows (probe + its flag)
  bool single_copy_in = false;   // the peer may write into ours (its WAKEUP said so, not declined)
  uint64_t windows_offered = 0;  // ADVERTs we sent
  uint64_t windows_filled = 0;   // of those, filled by a PUT with data
  uint64_t single_copy_bytes_sent = 0;
  uint64_t single_copy_bytes_received = 0;
  // Sends from the application's memory (StreamParams::zero_copy_min).
  uint64_t zero_copy_sends = 0;       // Send calls that posted from the caller's memory
  uint64_t zero_copy_bytes_sent = 0;  // bytes they posted (delivered or not: see Send)
  uint64_t zero_copy_refused = 0;     // registrations the provider refused (copied instead)
};

struct StreamShared;  // stream/state.h: the state block in shared memory

// A stream packed to move to another process of the same user (a fork child that accepted the
// connection, see socket/handover.h): its endpoint's image, its state block as bytes, where its
// buffers were, and its parameters.
struct StreamImage {
  fabric::EndpointImage endpoint;
  std::vector<std::byte> state;
  fabric::MemoryRegion recv_region;  // as the exporter had them (Endpoint::Reattach maps them)
  fabric::MemoryRegion staging_region;
  StreamParams params;
  uint32_t provider_caps = 0;
};

class Stream {
 public:
  // Carves the state block, receive and staging buffers out of the endpoint and posts the P
  // receives. Call before Endpoint::Connect/Accept. The endpoint's EndpointAttr must come from
  // EndpointAttrFor(params).
  static Result<std::unique_ptr<Stream>> Create(std::unique_ptr<fabric::Endpoint> endpoint,
                                                uint32_t provider_caps, const StreamParams& params);
  // The EndpointAttr a stream with these parameters needs.
  static fabric::EndpointAttr EndpointAttrFor(const StreamParams& params);
  ~Stream();
  // A fork child's copy of a stream its parent owns (a channel filed at the connection thread, a
  // connection closing in the close thread, a late move under way): a shm stream is destroyed,
  // which closes the child's copies of its fds and unmaps its copies of the memory and touches
  // nothing shared, so the parent's connection carries on -- and its peer still sees the parent's
  // death, which a copy of the rendezvous socket held open by a long-lived child would hide. A
  // verbs stream's objects name the parent's device resources, which a child must not destroy:
  // left as they are.
  static void ForgetForkCopy(std::unique_ptr<Stream> copy);

  // Moves the stream to another process: packs it (under its lock) into `out`. Afterwards this
  // object must only be destroyed; the importer carries on. ENOTSUP unless the provider can move
  // endpoints (kCapTransferable).
  Status Export(StreamImage* out);
  // Rebuilds an exported stream through `provider` (the same kind that made it). EINVAL for an
  // image that does not fit together.
  static Result<std::unique_ptr<Stream>> Import(fabric::Provider& provider, StreamImage image);

  // After the endpoint is connected/accepted: sends our WAKEUP.
  Status Start();
  // The same for a connection that ran on kernel TCP until now (socket/late_upgrade.h): the
  // WAKEUP says how many bytes we wrote to the kernel socket (`tcp_bytes`; the wake byte follows
  // them there).
  Status Start(std::optional<uint64_t> tcp_bytes);
  // The peer's count from its WAKEUP, once it arrived (this makes progress first); nullopt until
  // then, and for a peer that did not begin on TCP.
  std::optional<uint64_t> PeerTcpBytes();
  // The same for a client whose connect request was filed before connect() chose its TCP port
  // (client port 0: socket_ops.cc SetUpChannel): the WAKEUP names the port, `source_port`.
  Status StartNamed(uint16_t source_port);
  // The port the peer's WAKEUP named, once it arrived (this makes progress first); 0 until then,
  // and for a peer that named none.
  uint16_t PeerSourcePort();

  // Queues up to the whole of `iov` for sending; returns bytes taken (may be fewer than asked when
  // the window closes). EAGAIN: nothing could be taken now. EPIPE after ShutdownWrite. The sticky
  // error once the connection broke.
  // `left_buffered` (optional) is set when data stays in the combine buffer awaiting a flush.
  // `window_min` (single copy, 0 = never): a request of at least this many bytes goes straight
  // into a window the peer advertised, when one is usable (one process_vm_writev, then a PUT).
  // Zero copy (params().zero_copy_min): the packets are posted from iov[0] itself, registered with
  // the provider for this call, and Send returns only once the provider completed every one of
  // them (the NIC has read the memory: the caller may reuse it at once, as after a copy) or the
  // connection broke (the error; the registration is ended first, after which the device reads
  // nothing there). That wait is for the NIC, never for the peer application: every packet went
  // into a receive the peer had posted. A refused registration turns zero copy off for this
  // connection and the bytes are copied as usual.
  Result<size_t> Send(const iovec* iov, int iovcnt, bool* left_buffered = nullptr,
                      size_t window_min = 0);
  // Sends up to `count` bytes of the file `fd` from `offset` (san_sendfile), a DATA packet at a
  // time as the window allows: the provider reads them straight into the peer's buffers
  // (kCapSendFromFile: one copy in all), else they are read into a staging slot and posted from
  // there. Combined bytes waiting go first. Returns bytes sent; EAGAIN when the window is closed;
  // EPIPE, kMovedToTcp, the sticky error as Send. The file's outcome is separate: fewer bytes than
  // asked, or 0, with `*file_error` 0 at end of file, EAGAIN when `nowait` and the next bytes are
  // not in the page cache (read them ahead without the lock, then call again), else the read's
  // errno -- never the connection's error. The read runs under the stream's lock.
  Result<size_t> SendFile(int fd, off_t offset, size_t count, bool nowait, int* file_error);
  // Copies queued data into `iov`; with `peek` leaves it queued. Returns bytes copied, 0 at EOF
  // (peer's FIN and nothing queued), EAGAIN when nothing is there yet, or the sticky error.
  // `offer_min` (single copy, 0 = never; never with peek): when nothing is queued and iov[0] has at
  // least this many bytes, expose iov[0] as a window the peer may write into and advertise it
  // (EAGAIN). Later calls with the same iov[0] return what the peer wrote there. The caller must
  // keep iov[0] valid and call WithdrawWindow(iov[0].iov_base) before giving the buffer back.
  Result<size_t> Recv(const iovec* iov, int iovcnt, bool peek, size_t offer_min = 0);
  // Receiving into something other than memory (san_recvfile): lends the first queued bytes where
  // they lie, in the receive buffers -- at most `max`, as one piece per packet in order, in at
  // most room.size() pieces and half the window. Returns the pieces filled in `room`; results
  // otherwise as Recv's: no pieces at EOF, EAGAIN, or the sticky error. Until GiveBack, no Recv
  // or Borrow takes any bytes (EAGAIN) and the buffers stay ours (the peer cannot reuse them);
  // the caller may use the bytes without the lock, e.g. in a writev(2).
  Result<std::span<const iovec>> Borrow(size_t max, std::span<iovec> room);
  // Ends the loan: the first `used` bytes of it are delivered, the rest stay queued.
  void GiveBack(size_t used);
  // Ends the window this process offered over `buffer` (no-op if there is none): after it returns
  // the peer writes nothing more there. Returns how many bytes the peer wrote into it that no Recv
  // returned yet (the caller returns them to the application), 0 if none, or the sticky error if
  // the connection failed meanwhile. May wait, bounded, for a write in progress (docs).
  Result<size_t> WithdrawWindow(const void* buffer);
  // Bytes queued for reading right now (FIONREAD).
  size_t Available();

  // Posts any combined data now (recv/poll/close flush points and the timer), using credits
  // waiting in the completion queue; without credit it stays buffered (not an error).
  Status Flush();
  // Posts combined data whose timer has run out; returns whether bytes are still buffered (not yet
  // due, no credit, or the lock was busy). Cheap when there are none.
  bool FlushIfDue(uint64_t now_ns);
  // The process's combine timer is watching this stream (a per-process flag, not shared state):
  // TryArmTimer returns true for the caller that must register it.
  bool TryArmTimer() { return !timer_armed_.exchange(true, std::memory_order_acq_rel); }
  void DisarmTimer() { timer_armed_.store(false, std::memory_order_release); }
  // Flushes and sends FIN; further Send fails with EPIPE. Idempotent.
  Status ShutdownWrite();
  // Reaps completions and handles what arrived. Returns the sticky error if the connection broke.
  Status Progress();

  Readiness GetReadiness();
  // Counts the operations that ended on this stream, in any thread or process holding it (one
  // atomic load, no lock). While it equals a Readiness's `version` and the endpoint is quiet
  // (below), that Readiness still holds: every change of the state is an operation, and what the
  // peer sends waits in the endpoint until an operation reaps it.
  uint64_t Version() const;
  // Nothing waits in the endpoint to be reaped (fabric::Endpoint::Quiet): no lock taken.
  bool EndpointQuiet() { return endpoint_->Quiet(); }
  // Our FIN is acknowledged (so everything we sent arrived) and we owe the peer nothing (no
  // FINACK, no buffered data): safe to release. The peer's FIN is not waited for, as a kernel
  // socket in FIN_WAIT_2 holds no application state either. Releasing breaks the link: the peer
  // still reads everything and then EOF, but its later sends fail with ECONNRESET.
  bool Finished();
  // Exit's test (makes progress first): nothing of ours waits to be posted any more -- the FIN
  // requested by ShutdownWrite (and the combined bytes before it) went out, or the connection
  // broke. Either way exiting now loses nothing: what was posted is in the peer's buffers.
  bool NothingLeftToPost();
  // Abortive close: the peer sees ECONNRESET. Used for close with unread data and at exit.
  void Abort();
  // Marks the connection broken from outside (e.g. the kernel socket underneath died).
  void Fail(int error);

  // Processes holding this connection (fork): a fork child that inherits it adds itself; close()
  // and exit drop one, and only the last one closes the connection.
  void AddUser();
  // Returns true if the caller was the last user.
  bool DropUser();

  // ---- Moving to TCP (above) ----
  // Mover: flushes what it can and posts MOVE; afterwards nothing is posted over SAN. EAGAIN: no
  // room at the peer yet (call again); EBUSY: the peer is moving too (neither can).
  Status BeginMove();
  // Mover: reaps; true once the peer's MOVED arrived. ECONNRESET if the peer broke off.
  Result<bool> MoveAcknowledged();
  // Mover, once acknowledged: what the kernel socket must carry. The stream is spent afterwards.
  TcpHandover TakeForTcp();
  // Peer of a mover (whichever thread or process gets there; state is shared): sends MOVED if it
  // is owed, then advances the relay as far as the kernel socket allows (for the mover, once
  // TakeForTcp ran, there is nothing to relay: true). True when the relay is
  // complete (later data goes straight to the kernel socket; a later ShutdownWrite is applied to
  // it here too). EAGAIN while waiting for the kernel socket; ECONNRESET on a bad header, a
  // returned length beyond what we can have sent, or EOF before the relay ended.
  Result<bool> Relay(RelayIo& io);
  // MOVE went either way (one atomic load).
  bool Moved() const;
  // Peer of a mover: the kernel socket event (POLLIN/POLLOUT) the relay waits for; 0 once it is
  // done (and for a stream that is not relaying).
  short RelayWaitsFor() const;

  void SetNoDelay(bool nodelay);
  bool nodelay();
  StreamStats Stats();

  fabric::Endpoint& endpoint() { return *endpoint_; }
  const StreamParams& params() const { return params_; }
  // Streams that exist in this process (each holds its endpoint's fds: socket/fd_budget.h).
  static size_t live() { return live_.load(std::memory_order_relaxed); }

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

 private:
  Stream(std::unique_ptr<fabric::Endpoint> endpoint, uint32_t caps, const StreamParams& params);
  class Locked;  // the operations that run with the lock held (stream/locked.h)
  // Start's work: our WAKEUP, with the optional fields (wire.h WakeupBody) given.
  Status SendWakeup(std::optional<uint64_t> tcp_bytes, uint16_t source_port);

  std::unique_ptr<fabric::Endpoint> endpoint_;
  const uint32_t caps_;
  const StreamParams params_;
  StreamShared* shared_ = nullptr;
  fabric::MemoryRegion recv_region_;
  fabric::MemoryRegion staging_region_;
  std::atomic<bool> timer_armed_{false};
  static inline std::atomic<size_t> live_{0};
};

}  // namespace san::proto
