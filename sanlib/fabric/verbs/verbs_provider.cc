#include "sanlib/fabric/verbs/verbs_provider.h"

#include <arpa/inet.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "sanlib/common/clock.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/small_file.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/address.h"
#include "sanlib/fabric/verbs/verbs_endpoint.h"
#include "sanlib/fabric/verbs/verbs_library.h"
#include "sanlib/fabric/verbs/verbs_listener.h"

namespace san::fabric::verbs {
namespace {

constexpr uint64_t kAddressCacheNs = 1'000'000'000;
constexpr const char* kRdmaCmDevice = "/dev/infiniband/rdma_cm";

std::atomic<uint32_t> fork_generation{0};

// The key of the address a RoCE GID is made from ("::ffff:a.b.c.d" -> "a.b.c.d:0").
std::string GidKey(const ibv_gid& gid) {
  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  std::memcpy(&sin6.sin6_addr, gid.raw, 16);
  return HostKey(reinterpret_cast<sockaddr*>(&sin6), sizeof sin6);
}

// The reason Open gives when the RDMA connection manager is missing or refuses us.
std::string NoRdmaCm(const std::string& detail) {
  return "verbs: no rdma_cm (" + detail + "): this kernel has no RDMA connection manager";
}

bool IsIpoibInterface(const char* name) {
  std::string path = "/sys/class/net/";
  path.append(name).append("/type");
  const std::string type = FirstLineOf(path);
  char* end = nullptr;
  const long value = std::strtol(type.c_str(), &end, 10);
  return end != type.c_str() && value == ARPHRD_INFINIBAND;
}

}  // namespace

uint32_t ForkGeneration() { return fork_generation.load(std::memory_order_relaxed); }

VerbsProvider* VerbsProvider::Open(std::string* why_not) {
  // The cm device first: without /dev/infiniband/rdma_cm nothing here can work, and a host
  // without RDMA (most) then never loads libibverbs and librdmacm at all (verbs_library.h).
  if (access(kRdmaCmDevice, F_OK) != 0) {
    *why_not = NoRdmaCm(std::string(kRdmaCmDevice) + ": " + strerror(errno));
    return nullptr;
  }
  if (!LoadVerbsLibraries(why_not)) return nullptr;
  // Registered memory and fork(): a kernel that copies pinned pages for the child by itself
  // (Linux >= 5.13) needs nothing; otherwise libibverbs must mark registrations MADV_DONTFORK,
  // which it can only do if asked before the first device is opened.
  const ibv_fork_status fork_status = ibv().is_fork_initialized();
  if (fork_status == IBV_FORK_DISABLED && ibv().fork_init() != 0) {
    SAN_LOG_WARN("verbs: ibv_fork_init failed: fork children must not touch verbs buffers");
  }
  // The device may exist and still refuse us (permissions, a kernel without the module loaded).
  rdma_event_channel* probe = rdma().create_event_channel();
  if (probe == nullptr) {
    *why_not = NoRdmaCm(strerror(errno));
    return nullptr;
  }
  rdma().destroy_event_channel(probe);
  int n = 0;
  ibv_context** contexts = rdma().get_devices(&n);
  if (contexts == nullptr || n == 0) {
    if (contexts != nullptr) rdma().free_devices(contexts);
    *why_not = "verbs: no RDMA device";
    return nullptr;
  }
  auto* p = new VerbsProvider();
  p->contexts_ = contexts;
  // Sends from registered application memory: only where registration leaves the application's
  // pages alone at fork(). Under ibv_fork_init every registration marks its pages MADV_DONTFORK,
  // and on an application buffer (a heap or stack page shared with unrelated data) a fork child
  // made meanwhile would find those pages missing.
  p->registered_send_ = fork_status == IBV_FORK_UNNEEDED;
  for (int i = 0; i < n; ++i) {
    ibv_pd* pd = ibv().alloc_pd(contexts[i]);
    if (pd == nullptr) {
      SAN_LOG_WARN("verbs: ibv_alloc_pd(%s): %s", ibv().get_device_name(contexts[i]->device),
                   strerror(errno));
      continue;
    }
    p->devices_.push_back(Device{contexts[i], pd});
  }
  if (p->devices_.empty()) {
    *why_not = "verbs: no usable RDMA device (ibv_alloc_pd failed)";
    rdma().free_devices(contexts);
    delete p;
    return nullptr;
  }
  p->mu_.HoldAcrossForks();  // the registry makes at most one provider (registry.h)
  pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
  return p;
}

ibv_pd* VerbsProvider::PdFor(ibv_context* context) const {
  for (const Device& d : devices_) {
    if (d.context == context) return d.pd;
  }
  return nullptr;
}

bool VerbsProvider::SourceHasDevice(const std::string& source_key) const {
  std::lock_guard<ForkHeldMutex> lock(mu_);
  const uint64_t now = NowNs();
  if (rdma_keys_at_ns_ == 0 || now - rdma_keys_at_ns_ > kAddressCacheNs) {
    rdma_keys_.clear();
    for (const Device& d : devices_) {
      ibv_gid_entry entries[256];
      const ssize_t k = ibv().query_gid_table(d.context, entries, 256, 0, sizeof(ibv_gid_entry));
      for (ssize_t i = 0; i < k; ++i) {
        std::string key = GidKey(entries[i].gid);
        if (!key.empty()) rdma_keys_.push_back(std::move(key));
      }
    }
    // IPoIB: rdma_cm resolves its addresses through the netdev.
    for (std::string& key : InterfaceHostKeys(IsIpoibInterface))
      rdma_keys_.push_back(std::move(key));
    rdma_keys_at_ns_ = now;
  }
  return std::find(rdma_keys_.begin(), rdma_keys_.end(), source_key) != rdma_keys_.end();
}

bool VerbsProvider::Reaches(const sockaddr* peer, socklen_t len) const {
  if (peer == nullptr || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6)) return false;
  // rdma_cm's loopback path (127.0.0.1 bound to "some device") did not connect on rxe: loopback
  // peers are the shm provider's anyway.
  if (IsLoopbackAddress(peer, len)) return false;
  // Which local address would the kernel send from? A connected UDP socket says (no packet sent).
  UniqueFd udp(kernel::socket(peer->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!udp.valid() || kernel::connect(udp.get(), peer, len) != 0) return false;
  sockaddr_storage source{};
  socklen_t source_len = sizeof source;
  if (getsockname(udp.get(), reinterpret_cast<sockaddr*>(&source), &source_len) != 0) return false;
  const std::string key = HostKey(reinterpret_cast<sockaddr*>(&source), source_len);
  return !key.empty() && SourceHasDevice(key);
}

Result<std::unique_ptr<Listener>> VerbsProvider::Listen(const sockaddr* addr, socklen_t len,
                                                        const EndpointAttr& attr) {
  Result<std::unique_ptr<VerbsListener>> l = VerbsListener::Create(*this, addr, len, attr);
  if (!l.ok()) return l.status();
  return std::unique_ptr<Listener>(std::move(l).value());
}

Result<std::unique_ptr<Endpoint>> VerbsProvider::CreateEndpoint(const EndpointAttr& attr) {
  Result<std::unique_ptr<VerbsEndpoint>> ep = VerbsEndpoint::CreateClient(*this, attr);
  if (!ep.ok()) return ep.status();
  return std::unique_ptr<Endpoint>(std::move(ep).value());
}

}  // namespace san::fabric::verbs
