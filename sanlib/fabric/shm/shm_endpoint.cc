#include "sanlib/fabric/shm/shm_endpoint.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "sanlib/common/clock.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/fabric/shm/rendezvous.h"
#include "sanlib/fabric/shm/ring.h"

namespace san::fabric::shm {
namespace {

constexpr uint32_t kLivenessEveryEmptyPolls = 4096;
constexpr uint64_t kLivenessIntervalNs = 100'000;  // at most one socket peek per 100 us
constexpr uint32_t kBufferAlign = 64;

}  // namespace

Result<std::unique_ptr<ShmEndpoint>> ShmEndpoint::Create(Parts parts) {
  uint32_t queue = std::bit_ceil(std::max<uint32_t>(parts.attr.send_depth, 1));
  Result<LocalRegion> local = LocalRegion::Create(queue);
  if (!local.ok()) return local.status();
  std::unique_ptr<ShmEndpoint> ep(new ShmEndpoint(std::move(parts), std::move(local).value()));
  ep->send_queue_mask_ = queue - 1;
  Status s = ep->Setup();
  if (!s.ok()) return s;
  return ep;
}

ShmEndpoint::ShmEndpoint(Parts parts, LocalRegion local)
    : parts_(std::move(parts)), local_region_(std::move(local)) {}

ShmEndpoint::~ShmEndpoint() = default;

Status ShmEndpoint::Setup() {
  base_ = static_cast<std::byte*>(parts_.segment.data());
  if (exporter_base_ == 0) exporter_base_ = reinterpret_cast<uintptr_t>(base_);
  local_ = local_region_.state();
  send_ids_ = local_region_.send_ids();
  const int own = static_cast<int>(parts_.side);
  const int peer = 1 - own;
  const Layout& l = parts_.layout;
  own_ = reinterpret_cast<SideBlock*>(base_ + l.side_offset[own]);
  peer_ = reinterpret_cast<SideBlock*>(base_ + l.side_offset[peer]);
  own_arena_begin_ = l.arena_offset[own];
  own_arena_end_ = l.arena_offset[own] + l.arena_bytes[own];
  peer_arena_begin_ = l.arena_offset[peer];
  peer_arena_end_ = l.arena_offset[peer] + l.arena_bytes[peer];
  own_arena_budget_ = std::min<uint64_t>(parts_.attr.buffer_bytes, l.arena_bytes[own]);

  epoll_.reset(PlaceHigh(kernel::epoll_create1(EPOLL_CLOEXEC)));
  if (!epoll_.valid()) return Status::FromErrno("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = parts_.own_doorbell.get();
  if (kernel::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, parts_.own_doorbell.get(), &ev) != 0) {
    return Status::FromErrno("epoll_ctl(doorbell)");
  }
  if (parts_.rendezvous.valid()) {
    // EOF on the rendezvous socket (peer gone) makes notify_fd() readable too, so a sleeper
    // cannot miss the death of a peer that will never ring.
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = parts_.rendezvous.get();
    if (kernel::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, parts_.rendezvous.get(), &ev) != 0) {
      return Status::FromErrno("epoll_ctl(rendezvous)");
    }
  }
  return Status::Ok();
}

Result<MemoryRegion> ShmEndpoint::AllocateBuffer(size_t length) {
  if (length == 0) return Status(EINVAL, "AllocateBuffer: empty");
  const uint64_t size = AlignUp(length, kBufferAlign);
  uint64_t used = local_->arena_used.load(std::memory_order_relaxed);
  do {
    if (size > own_arena_budget_ - used) return Status(ENOMEM, "AllocateBuffer: arena exhausted");
  } while (!local_->arena_used.compare_exchange_weak(used, used + size, std::memory_order_relaxed));
  MemoryRegion mr;
  mr.addr = base_ + own_arena_begin_ + used;
  mr.length = length;
  mr.key = 1;  // nothing to register: the arena is the segment
  return mr;
}

Status ShmEndpoint::PostRecv(const RecvWork& work) {
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) {
    return Status(ECONNRESET, "PostRecv");
  }
  // The buffer must lie in our own arena: the peer is told its offset and writes there.
  const auto* p = static_cast<const std::byte*>(work.addr);
  if (p < base_ + own_arena_begin_ || p > base_ + own_arena_end_ ||
      work.length > static_cast<size_t>(base_ + own_arena_end_ - p)) {
    return Status(EINVAL, "PostRecv: buffer outside the endpoint's arena");
  }
  const uint64_t pos = local_->recv_posted.load(std::memory_order_relaxed);
  if (pos - local_->recv_done.load(std::memory_order_acquire) >= parts_.attr.recv_depth) {
    return Status(EAGAIN, "PostRecv: receive queue full");
  }
  local_->posted[pos & kRingMask] = PostedRecv{work.id, work.length, 0};
  RecvDesc& d = own_->recv_ring[pos & kRingMask];
  d.offset.store(static_cast<uint64_t>(p - base_), std::memory_order_relaxed);
  d.length.store(work.length, std::memory_order_relaxed);
  d.seq.store(PublishedSeq(pos), std::memory_order_release);
  local_->recv_posted.store(pos + 1, std::memory_order_release);
  return Status::Ok();
}

Result<std::byte*> ShmEndpoint::ClaimPeerReceive(const SendWork& work, uint64_t extra,
                                                 SendSlot* slot) {
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) {
    return Status(ECONNRESET, "PostSend");
  }
  if (local_->connected.load(std::memory_order_relaxed) == 0) {
    return Status(ENOTCONN, "PostSend");
  }
  if (work.num_segments > kMaxSendSegments) return Status(EINVAL, "PostSend: segments");
  slot->segment_bytes = 0;
  for (int i = 0; i < work.num_segments; ++i) slot->segment_bytes += work.segments[i].length;
  const uint64_t total = slot->segment_bytes + extra;
  if (total > parts_.mtu) return Status(EMSGSIZE, "PostSend");
  slot->qtail = local_->sendq_tail.load(std::memory_order_relaxed);
  if (slot->qtail - local_->sendq_head.load(std::memory_order_acquire) >= parts_.attr.send_depth) {
    return Status(EAGAIN, "PostSend: send queue full");
  }

  // Take the peer's next posted receive. Read each field once, then check it against our limits.
  slot->pos = local_->sent.load(std::memory_order_relaxed);
  RecvDesc& desc = peer_->recv_ring[slot->pos & kRingMask];
  switch (ClassifySlot(desc.seq.load(std::memory_order_acquire), slot->pos)) {
    case SlotState::kReady:
      break;
    case SlotState::kEmpty:
      Break(EPROTO);
      return Status(EPROTO, "PostSend: peer has no receive posted");
    case SlotState::kCorrupt:
      Break(ECONNRESET);
      return Status(ECONNRESET, "PostSend: corrupt receive descriptor");
  }
  const uint64_t offset = desc.offset.load(std::memory_order_relaxed);
  const uint32_t room = desc.length.load(std::memory_order_relaxed);
  if (offset < peer_arena_begin_ || offset > peer_arena_end_ || room > peer_arena_end_ - offset) {
    Break(ECONNRESET);
    return Status(ECONNRESET, "PostSend: receive descriptor outside the peer's arena");
  }
  if (total > room) {
    Break(EPROTO);
    return Status(EPROTO, "PostSend: message larger than the peer's receive");
  }
  std::byte* dst = base_ + offset;
  for (int i = 0; i < work.num_segments; ++i) {
    std::memcpy(dst, work.segments[i].addr, work.segments[i].length);
    dst += work.segments[i].length;
  }
  return dst;
}

void ShmEndpoint::Publish(const SendSlot& slot, uint64_t length, const SendWork& work) {
  RecvCompletion& c = peer_->completion_ring[slot.pos & kRingMask];
  c.length.store(static_cast<uint32_t>(length), std::memory_order_relaxed);
  c.imm.store(work.imm, std::memory_order_relaxed);
  // Doorbell, Dekker style: this store and the receiver's armed store in Arm() are both seq_cst,
  // as are the loads that follow them, so at least one side sees the other: either Arm() finds
  // the completion, or we find the flag and ring. (seq_cst operations rather than fences: same
  // cost on x86 -- one locked instruction -- and ThreadSanitizer understands them.)
  c.seq.store(PublishedSeq(slot.pos), std::memory_order_seq_cst);
  local_->sent.store(slot.pos + 1, std::memory_order_relaxed);

  send_ids_[slot.qtail & send_queue_mask_] = work.id;
  local_->sendq_tail.store(slot.qtail + 1, std::memory_order_release);

  if (peer_->armed.load(std::memory_order_seq_cst) != 0 &&
      peer_->armed.exchange(0, std::memory_order_seq_cst) != 0) {
    Ring(parts_.peer_doorbell.get());
  }
}

Status ShmEndpoint::PostSend(const SendWork& work) {
  SendSlot slot;
  Result<std::byte*> dst = ClaimPeerReceive(work, 0, &slot);
  if (!dst.ok()) return dst.status();
  Publish(slot, slot.segment_bytes, work);
  return Status::Ok();
}

Status ShmEndpoint::PostSendFromFile(const SendWork& work, const FileSlice& file, FileRead* read) {
  *read = FileRead{};
  SendSlot slot;
  Result<std::byte*> dst = ClaimPeerReceive(work, file.length, &slot);
  if (!dst.ok()) return dst.status();
  // Straight from the page cache into the peer's buffer. Nothing is published until the read
  // succeeded, so a failed read leaves the receive posted and the connection as it was.
  *read = ReadFileSlice(file, dst.value());
  if (read->bytes == 0) return Status::Ok();
  Publish(slot, slot.segment_bytes + read->bytes, work);
  return Status::Ok();
}

int ShmEndpoint::Poll(Completion* out, int max) {
  if (max <= 0) return 0;
  int n = 0;
  // Send completions: already done inside PostSend, reported here in posting order.
  uint64_t qhead = local_->sendq_head.load(std::memory_order_relaxed);
  const uint64_t qtail = local_->sendq_tail.load(std::memory_order_acquire);
  while (n < max && qhead != qtail) {
    out[n++] = Completion{send_ids_[qhead & send_queue_mask_], Op::kSend, 0, 0, 0};
    ++qhead;
  }
  local_->sendq_head.store(qhead, std::memory_order_release);

  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) return PollBroken(out, max, n);

  uint64_t pos = local_->recv_done.load(std::memory_order_relaxed);
  const uint64_t posted = local_->recv_posted.load(std::memory_order_acquire);
  while (n < max) {
    RecvCompletion& c = own_->completion_ring[pos & kRingMask];
    SlotState state = ClassifySlot(c.seq.load(std::memory_order_acquire), pos);
    if (state == SlotState::kEmpty) break;
    const uint32_t length = c.length.load(std::memory_order_relaxed);
    const PostedRecv& r = local_->posted[pos & kRingMask];
    if (state == SlotState::kCorrupt || pos == posted || length > r.length) {
      local_->recv_done.store(pos, std::memory_order_release);
      Break(ECONNRESET);
      return PollBroken(out, max, n);
    }
    out[n++] = Completion{r.id, Op::kRecv, 0, length, c.imm.load(std::memory_order_relaxed)};
    ++pos;
  }
  local_->recv_done.store(pos, std::memory_order_release);
  if (n != 0) return n;

  // Nothing at all: the cheap checks for a peer that went away.
  if (peer_->gone.load(std::memory_order_relaxed) != 0) {
    Break(ECONNRESET);
    return PollBroken(out, max, n);
  }
  const uint32_t empty = local_->empty_polls.load(std::memory_order_relaxed) + 1;
  local_->empty_polls.store(empty, std::memory_order_relaxed);
  if (empty % kLivenessEveryEmptyPolls == 0) {
    CheckPeerAlive(false);
    if (local_->broken_reason.load(std::memory_order_relaxed) != 0) return PollBroken(out, max, n);
  }
  return 0;
}

bool ShmEndpoint::Quiet() {
  // The send queue is not looked at (two cache lines of the few a look costs): its completions
  // come from our own PostSend, inside an operation of the stream.
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0 ||
      peer_->gone.load(std::memory_order_relaxed) != 0) {
    return false;
  }
  const uint64_t pos = local_->recv_done.load(std::memory_order_acquire);
  const RecvCompletion& c = own_->completion_ring[pos & kRingMask];
  if (ClassifySlot(c.seq.load(std::memory_order_acquire), pos) != SlotState::kEmpty) return false;
  // A quiet look counts as one of Poll's empty ones; the one due for the liveness peek is left to
  // Poll (a peer killed while its connection idles is found as soon as with Poll alone).
  const uint32_t empty = local_->empty_polls.load(std::memory_order_relaxed) + 1;
  if (empty % kLivenessEveryEmptyPolls == 0) return false;
  local_->empty_polls.store(empty, std::memory_order_relaxed);
  return true;
}

// Once broken: receives that already completed are still delivered (stopping at the first slot
// that is not cleanly ready), then every other posted receive is flushed with ECONNRESET.
int ShmEndpoint::PollBroken(Completion* out, int max, int n) {
  uint64_t pos = local_->recv_done.load(std::memory_order_relaxed);
  const uint64_t posted = local_->recv_posted.load(std::memory_order_acquire);
  bool clean = true;
  while (n < max && pos != posted) {
    const PostedRecv& r = local_->posted[pos & kRingMask];
    Completion c{r.id, Op::kRecv, ECONNRESET, 0, 0};
    if (clean) {
      RecvCompletion& rc = own_->completion_ring[pos & kRingMask];
      const uint32_t length = rc.length.load(std::memory_order_relaxed);
      if (ClassifySlot(rc.seq.load(std::memory_order_acquire), pos) == SlotState::kReady &&
          length <= r.length) {
        c.error = 0;
        c.length = length;
        c.imm = rc.imm.load(std::memory_order_relaxed);
      } else {
        clean = false;
      }
    }
    out[n++] = c;
    ++pos;
  }
  local_->recv_done.store(pos, std::memory_order_release);
  return n;
}

bool ShmEndpoint::Arm() {
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) return false;
  own_->armed.store(1, std::memory_order_seq_cst);
  const uint64_t pos = local_->recv_done.load(std::memory_order_relaxed);
  const uint32_t seq = own_->completion_ring[pos & kRingMask].seq.load(std::memory_order_seq_cst);
  if (ClassifySlot(seq, pos) != SlotState::kEmpty || peer_->gone.load(std::memory_order_relaxed)) {
    // `armed` stays set: another thread of ours may be asleep on it (several threads polling one
    // socket), and clearing it would keep the sender from ringing for that thread. The cost is at
    // most one ring nobody waits for, emptied by the next ClearNotify().
    return false;
  }
  return true;
}

void ShmEndpoint::ClearNotify() {
  // One read empties an eventfd (it returns the whole count). A ring that lands just after it is
  // for the next sleep, whose Arm() re-checks the ring anyway. A wake-up the doorbell explains
  // needs no liveness peek: a peer that breaks its side rings us and sets `gone` (Poll checks
  // that), and one that dies leaves its rendezvous socket at EOF, which ends the next sleep
  // without a ring -- that wake-up peeks (rate-limited like Poll's), as does Poll every
  // kLivenessEveryEmptyPolls empty looks.
  uint64_t value;
  if (kernel::read(parts_.own_doorbell.get(), &value, sizeof(value)) > 0) return;
  CheckPeerAlive(false);
}

void ShmEndpoint::Ring(int eventfd) {
  const uint64_t one = 1;
  // Nonblocking: a saturated counter (EAGAIN) is already "ringing".
  [[maybe_unused]] ssize_t rc = kernel::write(eventfd, &one, sizeof(one));
}

void ShmEndpoint::Break(int reason) const {
  int expected = 0;
  if (!local_->broken_reason.compare_exchange_strong(expected, reason, std::memory_order_acq_rel)) {
    return;
  }
  own_->gone.store(1, std::memory_order_seq_cst);
  Ring(parts_.peer_doorbell.get());
  Ring(parts_.own_doorbell.get());
  if (parts_.rendezvous.valid()) kernel::shutdown(parts_.rendezvous.get(), SHUT_RDWR);
}

void ShmEndpoint::CheckPeerAlive(bool force) const {
  if (!parts_.rendezvous.valid() || local_->connected.load(std::memory_order_relaxed) == 0) return;
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) return;
  const uint64_t now = NowNs();
  if (!force &&
      now - local_->last_liveness_check_ns.load(std::memory_order_relaxed) < kLivenessIntervalNs) {
    return;
  }
  local_->last_liveness_check_ns.store(now, std::memory_order_relaxed);
  char byte;
  ssize_t n = kernel::recv(parts_.rendezvous.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  // 0: EOF, the peer process is gone. > 0: nothing may arrive here after set-up.
  if (n >= 0 || (errno != EAGAIN && errno != EINTR)) Break(ECONNRESET);
}

Status ShmEndpoint::Connect(const sockaddr* server, socklen_t len, const ConnectData& data) {
  UniqueFd dialed(data.dialed_fd);  // ours from here on, whatever happens (Provider::Dial)
  if (parts_.side != Side::kClient || parts_.rendezvous.valid() || answering_.valid()) {
    return Status(EISCONN, "Connect");
  }
  if (data.length > ConnectData::kMax) return Status(EINVAL, "Connect: data length");
  Result<UniqueFd> sock =
      dialed.valid() ? Result<UniqueFd>(std::move(dialed)) : ConnectRendezvous(server, len);
  if (!sock.ok()) return sock.status();
  // A listener of another user refuses us unless we bring a proof (ListenProved): say so now,
  // rather than have it close the connection ("no listener").
  if (data.proof_fd < 0) {
    Status same = CheckPeerCredentials(sock->get());
    if (!same.ok()) return Status(EACCES, "shm rendezvous: the listener runs as another user");
  }
  parts_.peer_pid = PeerPid(sock->get());

  RequestMessage req{};
  req.magic = kRendezvousMagic;
  req.version = kRendezvousVersion;
  req.ring_slots = kRingSlots;
  req.arena_bytes[0] = parts_.layout.arena_bytes[0];
  req.arena_bytes[1] = parts_.layout.arena_bytes[1];
  req.data_length = data.length;
  std::memcpy(req.data, data.bytes, data.length);
  req.seen_pid = parts_.peer_pid;
  const int fds[kMaxRequestFds] = {parts_.segment.fd(), parts_.own_doorbell.get(),
                                   parts_.peer_doorbell.get(), data.proof_fd};
  if (data.proof_fd >= 0) req.flags |= kHasProof;
  Status s = SendMessage(sock->get(), &req, sizeof(req), fds,
                         data.proof_fd >= 0 ? kMaxRequestFds : kRequestFds);
  if (!s.ok()) return s;

  // The listener's verdict, now (bounded) or later (FinishConnect).
  const int wait_ms = data.timeout_ms > 0 ? data.timeout_ms : kConnectTimeoutMs;
  answer_deadline_ns_ = NowNs() + uint64_t(wait_ms) * 1000000;
  answering_ = std::move(sock).value();
  if (data.answer_later) return Status(EINPROGRESS, "Connect: the listener's answer is pending");
  return FinishConnect(wait_ms);
}

Status ShmEndpoint::FinishConnect(int wait_ms) {
  if (!answering_.valid()) {
    return local_->connected.load(std::memory_order_acquire) != 0
               ? Status::Ok()
               : Status(ENOTCONN, "FinishConnect: no Connect pending");
  }
  // A failure is final: the rendezvous connection goes (a later call says ENOTCONN).
  auto fail = [this](Status st) {
    answering_.reset();
    return st;
  };
  const uint64_t deadline = std::min(answer_deadline_ns_, NowNs() + uint64_t(wait_ms) * 1000000);
  ReplyMessage reply{};
  for (;;) {
    const uint64_t now = NowNs();
    pollfd pfd{answering_.get(), POLLIN, 0};
    int rc = kernel::poll(&pfd, 1,
                          now >= deadline ? 0 : static_cast<int>((deadline - now) / 1000000) + 1);
    if (rc < 0 && errno != EINTR) return fail(Status::FromErrno("poll(shm rendezvous)"));
    if (rc > 0) {
      Status s = ReceiveMessage(answering_.get(), &reply, sizeof(reply), nullptr, 0);
      if (s.ok()) break;
      if (!s.would_block()) {
        return fail(s.code() == ECONNRESET ? Status(ECONNREFUSED, "Connect: listener closed") : s);
      }
    }
    const uint64_t after = NowNs();
    if (after >= answer_deadline_ns_) {
      return fail(Status(ETIMEDOUT, "Connect: no reply from listener"));
    }
    if (after >= deadline) return Status(EINPROGRESS, "Connect: the listener's answer is pending");
  }
  if (reply.magic != kRendezvousMagic) return fail(Status(EPROTO, "Connect: bad reply"));
  if (reply.error != 0) return fail(Status(reply.error, "Connect: refused by listener"));
  parts_.self_pid_seen = reply.seen_pid > 0 ? reply.seen_pid : 0;
  parts_.rendezvous = std::move(answering_);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = parts_.rendezvous.get();
  if (kernel::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, parts_.rendezvous.get(), &ev) != 0) {
    return Status::FromErrno("epoll_ctl(rendezvous)");
  }
  local_->connected.store(1, std::memory_order_release);
  return Status::Ok();
}

Status ShmEndpoint::Accept() {
  if (parts_.side != Side::kServer || local_->connected.load(std::memory_order_relaxed) != 0) {
    return Status(EINVAL, "Accept");
  }
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0)
    return Status(ECONNRESET, "Accept");
  ReplyMessage reply{kRendezvousMagic, 0, parts_.peer_pid};
  Status s = SendMessage(parts_.rendezvous.get(), &reply, sizeof(reply), nullptr, 0);
  if (!s.ok()) {
    Break(ECONNRESET);
    return s;
  }
  local_->connected.store(1, std::memory_order_release);
  return Status::Ok();
}

Status ShmEndpoint::Reject(int error) {
  if (parts_.side != Side::kServer || local_->connected.load(std::memory_order_relaxed) != 0) {
    return Status(EINVAL, "Reject");
  }
  ReplyMessage reply{kRendezvousMagic, error != 0 ? error : ECONNREFUSED, 0};
  Status s = SendMessage(parts_.rendezvous.get(), &reply, sizeof(reply), nullptr, 0);
  Break(ECONNREFUSED);
  return s;
}

void ShmEndpoint::Disconnect() { Break(ECONNRESET); }

bool ShmEndpoint::ListFds(std::vector<int>* out) const {
  for (int fd : {parts_.segment.fd(), parts_.own_doorbell.get(), parts_.peer_doorbell.get(),
                 parts_.rendezvous.get(), epoll_.get()}) {
    if (fd >= 0) out->push_back(fd);
  }
  return true;
}

bool ShmEndpoint::broken() const {
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) return true;
  if (peer_->gone.load(std::memory_order_relaxed) != 0) {
    Break(ECONNRESET);
    return true;
  }
  // Always look (one nonblocking peek): callers are cold paths (the close thread, the connection
  // thread's pending channels, accept's claim), and a claim must not miss a client that gave up
  // within the data path's rate-limit interval.
  CheckPeerAlive(true);
  return local_->broken_reason.load(std::memory_order_relaxed) != 0;
}

}  // namespace san::fabric::shm
