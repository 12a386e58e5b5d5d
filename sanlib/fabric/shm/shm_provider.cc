#include "sanlib/fabric/shm/shm_provider.h"

#include <netinet/in.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sanlib/common/clock.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/shared_mapping.h"
#include "sanlib/fabric/address.h"
#include "sanlib/fabric/shm/rendezvous.h"
#include "sanlib/fabric/shm/shm_endpoint.h"
#include "sanlib/fabric/shm/shm_layout.h"
#include "sanlib/fabric/shm/shm_listener.h"

namespace san::fabric::shm {
namespace {

constexpr uint64_t kAddressCacheNs = 1'000'000'000;
constexpr uint32_t kMaxSendDepth = 1u << 16;

Status CheckAttr(const EndpointAttr& attr) {
  if (attr.recv_depth == 0 || attr.recv_depth > kRingSlots) return Status(EINVAL, "recv_depth");
  if (attr.send_depth == 0 || attr.send_depth > kMaxSendDepth) return Status(EINVAL, "send_depth");
  if (attr.buffer_bytes > kMaxArenaBytes) return Status(EINVAL, "buffer_bytes");
  return Status::Ok();
}

}  // namespace

ShmProvider::ShmProvider() {
  // Can this process use process_vm_writev at all (a seccomp filter or an old kernel says
  // ENOSYS/EPERM)? A write of one byte to address 0 of ourselves: EFAULT means yes, nothing moved.
  char byte = 0;
  iovec local{&byte, 1};
  iovec remote{nullptr, 1};
  single_copy_ = process_vm_writev(getpid(), &local, 1, &remote, 1, 0) < 0 && errno == EFAULT;
  // Providers live for the process (registry.h), so the fork handlers may refer to this one. Only
  // the first provider object registers (tests may make more; they do not fork around them).
  static std::once_flag once;
  std::call_once(once, [this] { mu_.HoldAcrossForks(); });
}

bool ShmProvider::Reaches(const sockaddr* peer, socklen_t len) const {
  if (IsLoopbackAddress(peer, len)) return true;
  const std::string key = HostKey(peer, len);
  if (key.empty()) return false;
  std::lock_guard<ForkHeldMutex> lock(mu_);
  const uint64_t now = NowNs();
  if (local_keys_at_ns_ == 0 || now - local_keys_at_ns_ > kAddressCacheNs) {
    local_keys_ = InterfaceHostKeys([](const char*) { return true; });
    local_keys_at_ns_ = now;
  }
  return std::find(local_keys_.begin(), local_keys_.end(), key) != local_keys_.end();
}

Result<std::unique_ptr<Listener>> ShmProvider::Listen(const sockaddr* addr, socklen_t len,
                                                      const EndpointAttr& attr) {
  return OpenListener(addr, len, attr, false);
}

Result<std::unique_ptr<Listener>> ShmProvider::ListenProved(const sockaddr* addr, socklen_t len,
                                                            const EndpointAttr& attr) {
  return OpenListener(addr, len, attr, true);
}

Result<std::unique_ptr<Listener>> ShmProvider::OpenListener(const sockaddr* addr, socklen_t len,
                                                            const EndpointAttr& attr, bool proved) {
  Status s = CheckAttr(attr);
  if (!s.ok()) return s;
  Result<std::string> key = AddressKey(addr, len);
  if (!key.ok()) return key.status();
  Result<std::unique_ptr<ShmListener>> l = ShmListener::Create(key.value(), attr, kMaxMtu, proved);
  if (!l.ok()) return l.status();
  return std::unique_ptr<Listener>(std::move(l).value());
}

int ShmProvider::RendezvousPid(const sockaddr* addr, socklen_t len) const {
  Result<std::string> key = AddressKey(addr, len);
  if (!key.ok()) return 0;
  // The listener's pid is what SO_PEERCRED reports to a client of its socket: connect, ask, and
  // close at once (the listener drops a connection that sends no request).
  UniqueFd sock(kernel::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return 0;
  sockaddr_storage where;
  socklen_t where_len;
  RendezvousAddress(key.value(), &where, &where_len);
  if (kernel::connect(sock.get(), reinterpret_cast<sockaddr*>(&where), where_len) != 0) return 0;
  return PeerPid(sock.get());
}

Result<UniqueFd> ShmProvider::Dial(const sockaddr* server, socklen_t len) {
  return ConnectRendezvous(server, len);
}

Result<std::unique_ptr<Endpoint>> ShmProvider::CreateEndpoint(const EndpointAttr& attr) {
  Status s = CheckAttr(attr);
  if (!s.ok()) return s;
  // Both arenas get our budget: the server takes min(its own budget, this).
  const size_t arena = AlignUp(attr.buffer_bytes, 64);
  const Layout layout = ComputeLayout(arena, arena);
  Result<SharedMapping> segment = SharedMapping::Create("sanlib-shm", layout.total_bytes);
  if (!segment.ok()) return segment.status();
  auto* header = static_cast<SegmentHeader*>(segment->data());
  header->magic = kSegmentMagic;
  header->version = kSegmentVersion;
  header->ring_slots = kRingSlots;
  header->arena_bytes[0] = arena;
  header->arena_bytes[1] = arena;
  header->total_bytes = layout.total_bytes;

  ShmEndpoint::Parts parts;
  parts.side = ShmEndpoint::Side::kClient;
  parts.attr = attr;
  parts.layout = layout;
  parts.segment = std::move(segment).value();
  parts.own_doorbell.reset(PlaceHigh(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)));
  parts.peer_doorbell.reset(PlaceHigh(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)));
  if (!parts.own_doorbell.valid() || !parts.peer_doorbell.valid()) {
    return Status::FromErrno("eventfd");
  }
  parts.mtu = kMaxMtu;
  Result<std::unique_ptr<ShmEndpoint>> ep = ShmEndpoint::Create(std::move(parts));
  if (!ep.ok()) return ep.status();
  return std::unique_ptr<Endpoint>(std::move(ep).value());
}

Result<std::unique_ptr<Endpoint>> ShmProvider::Import(EndpointImage image) {
  Result<std::unique_ptr<ShmEndpoint>> ep = ShmEndpoint::Import(std::move(image));
  if (!ep.ok()) return ep.status();
  return std::unique_ptr<Endpoint>(std::move(ep).value());
}

}  // namespace san::fabric::shm
