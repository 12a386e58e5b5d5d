// The state block of one Stream (proto/stream.h), private to the stream's implementation files.
//
// One StreamShared lives in an anonymous MAP_SHARED mapping of its own per stream: never in the
// endpoint's buffers, which the peer can write, and still shared with a fork child. It is plain
// data plus a process-shared lock, so Export copies it as bytes and Import validates the indices
// it will follow. It is split by concern; each part states what holds whenever the lock is free.
// Every field is guarded by `lock` except the atomics named as such.
#pragma once

#include <atomic>
#include <cstdint>

#include "sanlib/common/spin_lock.h"
#include "sanlib/proto/close_state.h"
#include "sanlib/proto/flow_control.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"

namespace san::proto::stream {

// Staging slots: where copied sends, combined bytes, file reads and our WAKEUP wait for their send
// completion (each slot is one MTU of the endpoint's staging region).
constexpr uint32_t kStagingSlots = 4;
constexpr uint32_t kMaxReceives = 512;  // P <= 255 + 255 + 2
// Send work ids: a staging slot's packet (the slot is free again at its completion) or a packet
// from anywhere else (the caller's memory, the stack, a file), whose completion frees nothing.
constexpr uint64_t kStagingTag = 1ull << 63;
constexpr uint64_t kDirectTag = 1ull << 62;

// The link: sequence numbers, credits and ACKs, the WAKEUP exchange, the close handshake and the
// sticky error; the part every packet goes through.
// - send_seq / recv_seq: the next packet's sequence number each way; a received packet whose seq
//   is not recv_seq is a violation.
// - Before wakeup_received only our WAKEUP may be posted, and only a WAKEUP accepted.
// - error != 0 is final: the endpoint is disconnected and every call returns it. violated implies
//   error == EPROTO (or an earlier error), and no packet reaped after it is handled.
// - sends_done <= sends_posted: every PostSend yields exactly one completion, in order.
struct LinkState {
  SendWindow window;
  DelayedAck acks;
  ReceiveAccount account;
  CloseState close;
  uint16_t send_seq = 0;
  uint16_t recv_seq = 0;
  bool wakeup_sent = false;
  bool wakeup_received = false;
  // From the peer's WAKEUP: its receive buffer size (the largest DATA it accepts), and whether
  // its connection began on kernel TCP and how many bytes it wrote there.
  uint32_t peer_buffer_size = 0;
  bool peer_from_tcp = false;
  uint64_t peer_tcp_bytes = 0;
  // The TCP port the peer's WAKEUP named (kWakeupNamesSource), 0 if none.
  uint16_t peer_source_port = 0;
  bool fin_pending = false;  // FIN requested, waiting for the combine buffer to drain
  bool nodelay = false;
  int error = 0;
  bool violated = false;  // the peer broke the protocol: nothing it sent after that is accepted
  // Stream offsets: bytes we sent and received (DATA, PUT, file data), for single copy's check
  // that a window lines up with the stream.
  uint64_t out_bytes = 0;
  uint64_t in_bytes = 0;
  uint64_t sends_posted = 0;
  uint64_t sends_done = 0;
};

struct RecvEntry {
  uint32_t buffer;
  uint32_t offset;  // bytes of it already delivered
  uint32_t length;
};

// Receive buffers: which are posted, and the queue of DATA that arrived and is not delivered yet.
// - Each of the P = receive_depth() buffers is in exactly one place: posted (posted[i] = 1),
//   queued (in entries), or briefly neither while its packet is handled.
// - count <= P; entries[(head + i) % kMaxReceives], i < count, are in arrival order and each has
//   offset < length.
// - While lent (stream.h Borrow), the first lent_length queued bytes, starting in buffer
//   lent_buffer at the head, are on loan: nothing is delivered until GiveBack.
struct ReceiveQueue {
  uint32_t head = 0;
  uint32_t count = 0;
  bool lent = false;
  uint32_t lent_buffer = 0;
  uint32_t lent_length = 0;
  RecvEntry entries[kMaxReceives];
  uint8_t posted[kMaxReceives];
};

// Send staging and combining (combiner.h): slots whose packet awaits its completion, and the one
// slot being filled with combined small sends.
// - fill_len > 0 implies fill_slot in [0, kStagingSlots) and !busy[fill_slot]; fill_len <= MTU.
// - fill_since_ns: when the first byte of the current fill was buffered (the combine timer).
struct StagingState {
  uint8_t busy[kStagingSlots];
  int32_t fill_slot = -1;
  uint32_t fill_len = 0;
  uint64_t fill_since_ns = 0;
};

// Sends from the application's memory (StreamParams::zero_copy_min): off once the provider refused
// a registration (it would refuse again, a syscall each time).
struct ZeroCopyState {
  bool off = false;
};

// Single copy (docs/protocol.md "Single copy"): windows of application memory the peer writes
// into directly, announced by ADVERT and accounted by PUT.
// - adv_valid: the sending side holds the peer's latest ADVERT, not used yet (used at most once).
// - win_open: the receiving side has one window out, offered by win_pid (windows never cross a
//   process), at stream offset win_offset == in_bytes when offered; win_put once its PUT came
//   (win_put_len <= win_len bytes were written).
// - big_memory: set to kBigMemory by a full-size DATA or a PUT, one less per smaller DATA; a
//   window is offered only while it is non-zero.
struct SingleCopyState {
  static constexpr uint32_t kBigMemory = 8;
  bool can_write = false;       // we may write into the peer's windows (provider probe said yes)
  bool peer_can_write = false;  // the peer may write into ours (its WAKEUP flag, until a PUT 0)
  uint32_t big_memory = 0;
  bool adv_valid = false;
  AdvertBody adv;
  bool win_open = false;
  bool win_put = false;
  int32_t win_pid = 0;
  uint32_t win_generation = 0;
  uint32_t win_len = 0;
  uint32_t win_put_len = 0;
  uint64_t win_addr = 0;
  uint64_t win_offset = 0;
};

// Moving to TCP (stream.h "Moving a connection to its kernel TCP socket"). The relay (peer of a
// mover) goes through its phases in order: read the MoveHeader, echo the returned bytes, write
// our unposted combined bytes; then done.
enum RelayPhase : uint8_t { kRelayHeader = 0, kRelayEcho = 1, kRelayUnsent = 2, kRelayDone = 3 };

// - At most one of sent (we are the mover) and peer_moved (the peer is); `moved` is their OR,
//   atomic so Stream::Moved() needs no lock. Once either is set nothing but our MOVED (owed by the
//   peer of a mover) is posted over SAN.
// - acked only after sent; handed_over only after acked (TakeForTcp ran).
// - relay_*: the peer of a mover's progress on the kernel socket; relay_waits (atomic, read
//   without the lock) is the kernel socket event the relay waits for, 0 when it is not waiting.
struct MoveState {
  std::atomic<bool> moved{false};
  bool sent = false;
  bool acked = false;
  bool handed_over = false;
  bool peer_moved = false;
  bool moved_owed = false;
  uint8_t relay_phase = kRelayHeader;
  bool relay_shut = false;     // the kernel socket was shut for writing
  uint64_t relay_left = 0;     // returned bytes still to echo
  uint32_t relay_written = 0;  // of our combined bytes, written to the kernel socket
  std::atomic<short> relay_waits{0};
};

}  // namespace san::proto::stream

namespace san::proto {

// Declared in stream.h; the whole per-stream state.
struct StreamShared {
  SpinLock lock;
  std::atomic<uint32_t> users{1};  // processes holding the connection (atomic: no lock)
  // One more each time the lock is released (Stream::Locked), so a reader without the lock can
  // tell that no operation changed the state since it last looked (Stream::Version). Written only
  // with the lock held.
  std::atomic<uint64_t> version{0};
  stream::LinkState link;
  stream::ReceiveQueue recv;
  stream::StagingState staging;
  stream::ZeroCopyState zero_copy;
  stream::SingleCopyState single_copy;
  stream::MoveState move;
  StreamStats stats;
};

}  // namespace san::proto
