// The stream's core: creation, the WAKEUP, readiness, closing and statistics. The link's
// per-packet work (posting, packet dispatch, reaping) is in stream/link_inl.h, inline; the
// features live beside it in stream/ (locked.h lists them); the interface and its contracts are
// in stream.h.
#include "sanlib/proto/stream.h"

#include <sys/mman.h>

#include <cerrno>
#include <new>

#include "sanlib/proto/stream/locked.h"
#include "sanlib/proto/stream/state.h"
#include "sanlib/proto/wire.h"

namespace san::proto {

using stream::kMaxReceives;
using stream::kStagingSlots;
using stream::kStagingTag;

namespace {

size_t Round64(size_t n) { return (n + 63) & ~size_t{63}; }

}  // namespace

Stream::Stream(std::unique_ptr<fabric::Endpoint> endpoint, uint32_t caps,
               const StreamParams& params)
    : endpoint_(std::move(endpoint)), caps_(caps), params_(params) {
  live_.fetch_add(1, std::memory_order_relaxed);
}

Stream::~Stream() {
  if (shared_) munmap(shared_, sizeof(StreamShared));
  live_.fetch_sub(1, std::memory_order_relaxed);
}

void Stream::ForgetForkCopy(std::unique_ptr<Stream> copy) {
  if (copy && copy->endpoint_->provider_kind() != fabric::ProviderKind::kShm) (void)copy.release();
}

fabric::EndpointAttr Stream::EndpointAttrFor(const StreamParams& params) {
  fabric::EndpointAttr attr;
  attr.recv_depth = params.receive_depth();
  attr.send_depth = params.receive_depth() + kStagingSlots + 8;
  attr.buffer_bytes = Round64(sizeof(StreamShared)) + 64 +
                      size_t{params.receive_depth() + kStagingSlots} * params.mtu + 4096;
  return attr;
}

Result<std::unique_ptr<Stream>> Stream::Create(std::unique_ptr<fabric::Endpoint> endpoint,
                                               uint32_t provider_caps, const StreamParams& params) {
  if (params.ack_threshold == 0 || params.ack_threshold >= params.window || params.window > 255 ||
      params.receive_depth() > kMaxReceives || params.mtu < 64 || params.mtu > endpoint->mtu()) {
    return Status(EINVAL, "stream parameters");
  }
  std::unique_ptr<Stream> s(new Stream(std::move(endpoint), provider_caps, params));
  // The state block must not be in the endpoint's buffers: the peer can write those at any time
  // (a scribbled lock, rq_head or fill_slot meant a hang or a wild read/write). An anonymous
  // MAP_SHARED mapping is ours alone and still shared with a fork child, like fabric/shm's
  // LocalState (DESIGN.md "Security and bad input").
  void* state = mmap(nullptr, sizeof(StreamShared), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (state == MAP_FAILED) return Status::FromErrno("mmap(stream state)");
  s->shared_ = new (state) StreamShared();
  Result<fabric::MemoryRegion> recv =
      s->endpoint_->AllocateBuffer(size_t{params.receive_depth()} * params.mtu);
  if (!recv.ok()) return recv.status();
  s->recv_region_ = recv.value();
  Result<fabric::MemoryRegion> staging =
      s->endpoint_->AllocateBuffer(size_t{kStagingSlots} * params.mtu);
  if (!staging.ok()) return staging.status();
  s->staging_region_ = staging.value();
  Locked l(*s);
  l.sh().link.acks.set_threshold(params.ack_threshold);
  l.sh().link.account.set_window(params.window);
  l.sh().link.nodelay = !params.combine.enabled;
  for (uint32_t i = 0; i < params.receive_depth(); ++i) {
    Status st = l.Repost(i);
    if (!st.ok()) return st;
  }
  return s;
}

Status Stream::Start() { return SendWakeup(std::nullopt, 0); }

Status Stream::Start(std::optional<uint64_t> tcp_bytes) { return SendWakeup(tcp_bytes, 0); }

Status Stream::StartNamed(uint16_t source_port) {
  if (source_port == 0) return Status(EINVAL, "StartNamed: port 0");
  return SendWakeup(std::nullopt, source_port);
}

Status Stream::SendWakeup(std::optional<uint64_t> tcp_bytes, uint16_t source_port) {
  Locked l(*this);
  StreamShared& sh = l.sh();
  if (sh.link.wakeup_sent) return Status::Ok();
  if (sh.link.error) return l.Error();
  WakeupBody body;
  body.window = static_cast<uint16_t>(params_.window);
  body.ack_reserve = static_cast<uint16_t>(params_.window / params_.ack_threshold + 1);
  body.buffer_size = params_.mtu;
  // Single copy: can we write into the peer's process? (The provider probes once.)
  sh.single_copy.can_write = (caps_ & fabric::kCapSingleCopy) &&
                             (caps_ & fabric::kCapSendFromAnyMemory) &&
                             endpoint_->CanWriteWindows();
  if (sh.single_copy.can_write) body.flags |= kWakeupCanWrite;
  if (tcp_bytes) {
    body.flags |= kWakeupFromTcp;
    body.tcp_bytes = *tcp_bytes;
  }
  if (source_port != 0) {
    body.flags |= kWakeupNamesSource;
    body.source_port = source_port;
  }
  int slot = l.FreeSlot();
  if (slot < 0) return Status(EAGAIN, "staging");
  EncodeWakeup(body, l.Slot(slot));
  fabric::Segment seg{l.Slot(slot), static_cast<uint32_t>(body.size()), staging_region_.key};
  Status st = l.PostPacket(PacketType::kWakeup, &seg, 1, kStagingTag | slot, true);
  if (!st.ok()) return st;
  sh.staging.busy[slot] = 1;
  sh.link.wakeup_sent = true;
  return Status::Ok();
}

std::optional<uint64_t> Stream::PeerTcpBytes() {
  Locked l(*this);
  l.Progress();
  if (!l.sh().link.peer_from_tcp) return std::nullopt;
  return l.sh().link.peer_tcp_bytes;
}

uint16_t Stream::PeerSourcePort() {
  Locked l(*this);
  l.Progress();
  return l.sh().link.peer_source_port;
}

Status Stream::ShutdownWrite() {
  Locked l(*this);
  if (l.sh().link.close.ShutdownWrite()) l.sh().link.fin_pending = true;
  return l.Progress();
}

Status Stream::Progress() {
  Locked l(*this);
  return l.Progress();
}

uint64_t Stream::Version() const { return shared_->version.load(std::memory_order_acquire); }

Readiness Stream::GetReadiness() {
  Locked l(*this);
  l.Progress();
  const StreamShared& sh = l.sh();
  Readiness r;
  r.error = sh.link.error;
  r.peer_closed = sh.link.close.peer_fin();
  r.write_closed = sh.link.close.fin_sent();
  r.readable = sh.recv.count > 0 || r.peer_closed || r.error ||
               (sh.single_copy.win_open && sh.single_copy.win_put);
  r.moved = l.MovedOff();
  r.packets_received = sh.stats.packets_received;
  r.version = l.VersionAtRelease();
  r.writable = !r.write_closed && sh.link.wakeup_received && !r.moved &&
               (sh.link.window.has_credit() ||
                (sh.staging.fill_len > 0 && sh.staging.fill_len < l.PacketMax()));
  return r;
}

bool Stream::Finished() {
  Locked l(*this);
  l.Progress();
  const StreamShared& sh = l.sh();
  // Our FIN is acknowledged (so everything before it arrived) and we owe nothing: the peer's own
  // FIN is not waited for, as a kernel socket in FIN_WAIT_2 holds no application state either.
  return sh.link.close.fin_sent() && sh.link.close.fin_acked() && !sh.link.close.finack_owed() &&
         !sh.link.fin_pending && sh.staging.fill_len == 0;
}

bool Stream::NothingLeftToPost() {
  Locked l(*this);
  l.Progress();
  return !l.sh().link.fin_pending || l.sh().link.error != 0 || endpoint_->broken() || l.MovedOff();
}

void Stream::Abort() {
  Locked l(*this);
  l.Fail(ECONNRESET);
}

void Stream::Fail(int error) {
  Locked l(*this);
  l.Fail(error);
}

void Stream::AddUser() { shared_->users.fetch_add(1, std::memory_order_acq_rel); }

bool Stream::DropUser() { return shared_->users.fetch_sub(1, std::memory_order_acq_rel) == 1; }

void Stream::SetNoDelay(bool nodelay) {
  Locked l(*this);
  l.sh().link.nodelay = nodelay || !params_.combine.enabled;
  if (l.sh().link.nodelay) l.Progress();  // setting TCP_NODELAY pushes what is buffered
}

bool Stream::nodelay() {
  Locked l(*this);
  return l.sh().link.nodelay;
}

StreamStats Stream::Stats() {
  Locked l(*this);
  StreamStats s = l.sh().stats;
  s.credits = l.sh().link.window.credits();
  s.window = l.sh().link.window.window();
  s.mtu = l.sh().link.peer_buffer_size ? l.PacketMax() : params_.mtu;
  s.phase = l.sh().link.close.phase();
  s.single_copy_out = l.sh().single_copy.can_write;
  s.single_copy_in = l.sh().single_copy.peer_can_write && endpoint_->CanExposeWindows();
  return s;
}

}  // namespace san::proto
