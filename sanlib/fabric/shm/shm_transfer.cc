// Moving a connected shm endpoint to another process of the same user (kCapTransferable).
//
// An endpoint is its four fds (segment memfd, own and peer doorbells, rendezvous socket: all
// shareable) plus its LocalState, which lives in an anonymous mapping the other process cannot
// reach, so it travels as bytes. The image's state bytes:
//
//   ImageHeader (fixed layout, this build's: both processes run the same library)
//   LocalRegion bytes (LocalState + send ids), exactly LocalRegion::SizeFor(queue) long
//
// Import checks everything it can (sizes, layout, seals, eventfds) before mapping; the sender is
// our own user (the socket layer checks SO_PEERCRED), so this is robustness, not a trust boundary.
#include <fcntl.h>

#include <bit>
#include <cstring>

#include "sanlib/fabric/shm/rendezvous.h"

#include "sanlib/common/fd_placement.h"
#include "sanlib/fabric/shm/shm_endpoint.h"

namespace san::fabric::shm {
namespace {

constexpr uint32_t kImageMagic = 0x53484d49;  // "SHMI"
constexpr uint32_t kImageVersion = 2;         // 2: the single-copy pids
constexpr size_t kImageFds = 4;               // segment, own doorbell, peer doorbell, rendezvous

struct ImageHeader {
  uint32_t magic;
  uint32_t version;
  int32_t side;
  uint32_t mtu;
  EndpointAttr attr;
  Layout layout;
  ConnectData peer_data;
  uint64_t exporter_base;
  uint64_t local_bytes;
  int32_t peer_pid;
  int32_t self_pid_seen;
};

uint32_t QueueSize(const EndpointAttr& attr) {
  return std::bit_ceil(std::max<uint32_t>(attr.send_depth, 1));
}

Result<UniqueFd> Dup(int fd) {
  UniqueFd d(DupHigh(fd));
  if (!d.valid()) return Status::FromErrno("dup(endpoint fd)");
  return d;
}

}  // namespace

Status ShmEndpoint::Export(EndpointImage* out) {
  if (local_->connected.load(std::memory_order_acquire) == 0) return Status(ENOTCONN, "Export");
  if (!parts_.rendezvous.valid()) return Status(EINVAL, "Export: no rendezvous socket");
  EndpointImage image;
  for (int fd : {parts_.segment.fd(), parts_.own_doorbell.get(), parts_.peer_doorbell.get(),
                 parts_.rendezvous.get()}) {
    Result<UniqueFd> d = Dup(fd);
    if (!d.ok()) return d.status();
    image.fds.push_back(std::move(d).value());
  }
  ImageHeader h{};
  h.magic = kImageMagic;
  h.version = kImageVersion;
  h.side = static_cast<int32_t>(parts_.side);
  h.mtu = parts_.mtu;
  h.attr = parts_.attr;
  h.layout = parts_.layout;
  h.peer_data = parts_.peer_data;
  h.exporter_base = exporter_base_;
  h.local_bytes = local_region_.size();
  h.peer_pid = parts_.peer_pid;
  h.self_pid_seen = parts_.self_pid_seen;
  image.state.resize(sizeof h + local_region_.size());
  memcpy(image.state.data(), &h, sizeof h);
  memcpy(image.state.data() + sizeof h, local_region_.bytes(), local_region_.size());
  *out = std::move(image);
  return Status::Ok();
}

Result<MemoryRegion> ShmEndpoint::Reattach(const MemoryRegion& exported) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(exported.addr);
  if (addr < exporter_base_) return Status(EINVAL, "Reattach: not a buffer of this endpoint");
  const uint64_t offset = addr - exporter_base_;
  const uint64_t used = local_->arena_used.load(std::memory_order_relaxed);
  if (offset < own_arena_begin_ || offset - own_arena_begin_ > used ||
      exported.length > used - (offset - own_arena_begin_)) {
    return Status(EINVAL, "Reattach: not a buffer of this endpoint");
  }
  MemoryRegion mr = exported;
  mr.addr = base_ + offset;
  return mr;
}

Result<std::unique_ptr<ShmEndpoint>> ShmEndpoint::Import(EndpointImage image) {
  ImageHeader h;
  if (image.fds.size() != kImageFds || image.state.size() < sizeof h) {
    return Status(EINVAL, "Import: image shape");
  }
  memcpy(&h, image.state.data(), sizeof h);
  if (h.magic != kImageMagic || h.version != kImageVersion || (h.side != 0 && h.side != 1) ||
      h.mtu == 0 || h.mtu > (1u << 20) || h.attr.recv_depth > kRingSlots ||
      h.attr.send_depth == 0 || h.attr.send_depth > 65536 ||
      h.local_bytes != LocalRegion::SizeFor(QueueSize(h.attr)) ||
      image.state.size() != sizeof h + h.local_bytes || h.peer_data.length > ConnectData::kMax) {
    return Status(EINVAL, "Import: image header");
  }
  if (h.layout.arena_bytes[0] > kMaxArenaBytes || h.layout.arena_bytes[1] > kMaxArenaBytes) {
    return Status(EINVAL, "Import: arena size");
  }
  const Layout expect = ComputeLayout(h.layout.arena_bytes[0], h.layout.arena_bytes[1]);
  if (memcmp(&expect, &h.layout, sizeof expect) != 0) return Status(EINVAL, "Import: layout");
  for (size_t i = 1; i <= 2; ++i) {
    if (Status st = CheckEventFd(image.fds[i].get()); !st.ok()) return st;
  }
  Result<SharedMapping> segment =
      SharedMapping::Attach(std::move(image.fds[0]), h.layout.total_bytes);
  if (!segment.ok()) return segment.status();
  Result<LocalRegion> local = LocalRegion::Create(QueueSize(h.attr));
  if (!local.ok()) return local.status();
  memcpy(local->bytes(), image.state.data() + sizeof h, h.local_bytes);
  // Single copy: whether *this* process may write into the peer is probed afresh (its seccomp
  // filter may differ); no window is exposed across a move (Export is a set-up operation). The
  // importer is not the process the peer validated, so it never exposes (CanExposeWindows).
  local->state()->write_probe.store(0, std::memory_order_relaxed);
  local->state()->window_exposed.store(0, std::memory_order_relaxed);
  Parts parts;
  parts.side = static_cast<Side>(h.side);
  parts.attr = h.attr;
  parts.layout = h.layout;
  parts.segment = std::move(segment).value();
  parts.own_doorbell = std::move(image.fds[1]);
  parts.peer_doorbell = std::move(image.fds[2]);
  parts.rendezvous = std::move(image.fds[3]);
  parts.peer_data = h.peer_data;
  parts.mtu = h.mtu;
  parts.peer_pid = h.peer_pid > 0 ? h.peer_pid : 0;
  parts.self_pid_seen = h.self_pid_seen > 0 ? h.self_pid_seen : 0;
  std::unique_ptr<ShmEndpoint> ep(new ShmEndpoint(std::move(parts), std::move(local).value()));
  ep->send_queue_mask_ = QueueSize(h.attr) - 1;
  ep->exporter_base_ = static_cast<uintptr_t>(h.exporter_base);
  Status st = ep->Setup();
  if (!st.ok()) return st;
  return ep;
}

}  // namespace san::fabric::shm
