// ShmProvider: the shared-memory backend, for connections between processes of one host (one
// network namespace). See shm_endpoint.h for the data path, rendezvous.h for set-up and
// docs/fabric.md for the contract and the segment layout.
//
// Thread-safety: every method may be called from any thread; Reaches() caches this namespace's
// interface addresses for a second under a mutex that fork() holds (common/fork_held_mutex.h: a
// fork by another thread inside Reaches() must not leave it locked in the child).
// Ownership: stateless apart from that cache; listeners and endpoints it creates are owned by the
// caller.
#pragma once

#include <string>
#include <vector>

#include "sanlib/common/fork_held_mutex.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::shm {

class ShmProvider final : public Provider {
 public:
  static constexpr uint32_t kMaxMtu = 1u << 20;

  ShmProvider();
  const char* name() const override { return "shm"; }
  ProviderKind kind() const override { return ProviderKind::kShm; }
  // kCapSingleCopy only where this process may call process_vm_writev at all (probed once, on
  // ourselves; each connection then probes its peer: ShmEndpoint::CanWriteWindows).
  uint32_t capabilities() const override {
    return kCapReliable | kCapSendFromAnyMemory | kCapWaitable | kCapTransferable |
           kCapSendFromFile | (single_copy_ ? kCapSingleCopy : 0u);
  }
  uint32_t max_mtu() const override { return kMaxMtu; }
  bool Reaches(const sockaddr* peer, socklen_t len) const override;
  Result<std::unique_ptr<Listener>> Listen(const sockaddr* addr, socklen_t len,
                                           const EndpointAttr& attr) override;
  Result<std::unique_ptr<Listener>> ListenProved(const sockaddr* addr, socklen_t len,
                                                 const EndpointAttr& attr) override;
  int RendezvousPid(const sockaddr* addr, socklen_t len) const override;
  Result<std::unique_ptr<Endpoint>> CreateEndpoint(const EndpointAttr& attr) override;
  Result<UniqueFd> Dial(const sockaddr* server, socklen_t len) override;
  Result<std::unique_ptr<Endpoint>> Import(EndpointImage image) override;

 private:
  Result<std::unique_ptr<Listener>> OpenListener(const sockaddr* addr, socklen_t len,
                                                 const EndpointAttr& attr, bool proved);

  bool single_copy_ = false;
  mutable ForkHeldMutex mu_;
  mutable std::vector<std::string> local_keys_;  // AddressKey with port 0 of every local address
  mutable uint64_t local_keys_at_ns_ = 0;
};

}  // namespace san::fabric::shm
