// VerbsProvider: the RDMA backend, for connections between hosts over InfiniBand, RoCE or iWARP
// through libibverbs (RC queue pairs) and librdmacm (connection management, port space
// RDMA_PS_TCP, the same port number as the TCP socket). See verbs_endpoint.h for the data path and
// docs/verbs.md for the design.
//
// Availability: Open() returns nullptr, with the reason, when this host cannot do verbs (no RDMA
// device, no /dev/infiniband/rdma_cm, the kernel refuses): "not available", never a crash.
// Fork: before touching any device it asks libibverbs whether registered memory survives fork()
// (ibv_is_fork_initialized); where the kernel does not copy pinned pages at fork by itself it calls
// ibv_fork_init(). Endpoints refuse to work in a fork child (verbs_endpoint.h).
//
// Thread-safety: every method may be called from any thread. Reaches() caches the set of local
// addresses that have an RDMA device for a second under a mutex that fork() holds
// (common/fork_held_mutex.h, as in ShmProvider). Ownership: the provider owns the device contexts
// (librdmacm's list) and one protection domain per device for the life of the process; listeners
// and endpoints it creates are owned by the caller and must not outlive it (providers are never
// destroyed: registry.h).
#pragma once

#include <rdma/rdma_cma.h>

#include <string>
#include <vector>

#include "sanlib/common/fork_held_mutex.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::verbs {

class VerbsProvider final : public Provider {
 public:
  // The largest message. Sends from memory the provider did not allocate go through a registered
  // bounce slot of this size per send-queue entry, so it is kept moderate.
  static constexpr uint32_t kMaxMtu = 64u << 10;

  // The provider, or nullptr with *why_not set.
  static VerbsProvider* Open(std::string* why_not);

  const char* name() const override { return "verbs"; }
  ProviderKind kind() const override { return ProviderKind::kVerbs; }
  // kCapRegisteredSend only where the kernel copies pinned pages for a fork child itself
  // (ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, Linux >= 5.13): see Open().
  uint32_t capabilities() const override {
    return kCapReliable | kCapSendFromAnyMemory | kCapWaitable |
           (registered_send_ ? kCapRegisteredSend : 0u);
  }
  uint32_t max_mtu() const override { return kMaxMtu; }
  // Loopback addresses: no (they are shm's; rdma_cm's loopback path did not connect on rxe).
  // Otherwise: the source address the kernel's routing picks for `peer` is an address of an RDMA
  // port (a RoCE GID, or an IPoIB interface). Four syscalls (a UDP socket, its connect and
  // getsockname, close) plus a table cached for a second.
  bool Reaches(const sockaddr* peer, socklen_t len) const override;
  Result<std::unique_ptr<Listener>> Listen(const sockaddr* addr, socklen_t len,
                                           const EndpointAttr& attr) override;
  Result<std::unique_ptr<Endpoint>> CreateEndpoint(const EndpointAttr& attr) override;

  // The protection domain of the device a connection was routed to (librdmacm's context).
  ibv_pd* PdFor(ibv_context* context) const;

 private:
  struct Device {
    ibv_context* context = nullptr;
    ibv_pd* pd = nullptr;
  };
  VerbsProvider() = default;
  bool SourceHasDevice(const std::string& source_key) const;

  bool registered_send_ = false;
  ibv_context** contexts_ = nullptr;  // rdma_get_devices (kept for the process's life)
  std::vector<Device> devices_;
  mutable ForkHeldMutex mu_;
  mutable std::vector<std::string> rdma_keys_;  // AddressKey (port 0) of addresses with a device
  mutable uint64_t rdma_keys_at_ns_ = 0;
};

// The fork generation of this process: 0 in the process that started, +1 in each fork child
// (pthread_atfork). An endpoint remembers the generation it was made in.
uint32_t ForkGeneration();

}  // namespace san::fabric::verbs
