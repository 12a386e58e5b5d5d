// LoopbackProvider: an in-process fabric for protocol tests, with fault injection (FaultPlan).
// Test-only: built into the tests (tests/support/CMakeLists.txt), never into libsan.
//
// Listeners are keyed by AddressKey in a registry owned by the provider object (no static
// registration); clients find them with the same exact-then-wildcard rule as shm. Every IP address
// is "reachable" (ECONNREFUSED at Connect when nobody listens there).
// Capabilities: kCapReliable (unless the fault plan drops messages) | kCapSendFromAnyMemory |
// kCapWaitable.
// Thread-safety: all methods may be called from any thread. Ownership: the provider must outlive
// its listeners; endpoints hold a pointer to it and must not outlive it either (SharedProvider's
// lives for the process).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "sanlib/fabric/provider.h"
#include "support/loopback/fault_plan.h"
#include "support/loopback/link.h"

namespace san::fabric::loopback {

class LoopbackListener;

class LoopbackProvider final : public Provider {
 public:
  static constexpr uint32_t kMaxMtu = 1u << 20;

  explicit LoopbackProvider(const FaultPlan& plan = FaultPlan());

  // Applies to endpoints (client and server) created from now on.
  void set_fault_plan(const FaultPlan& plan);
  FaultPlan fault_plan() const;

  const char* name() const override { return "loopback"; }
  ProviderKind kind() const override { return ProviderKind::kTest; }
  uint32_t capabilities() const override;
  uint32_t max_mtu() const override { return kMaxMtu; }
  bool Reaches(const sockaddr* peer, socklen_t len) const override;
  Result<std::unique_ptr<Listener>> Listen(const sockaddr* addr, socklen_t len,
                                           const EndpointAttr& attr) override;
  Result<std::unique_ptr<Endpoint>> CreateEndpoint(const EndpointAttr& attr) override;

  // For LoopbackEndpoint::Connect: builds the server side of `link` at the listener for `server`
  // and queues it. ECONNREFUSED when nobody listens there.
  Status Request(const sockaddr* server, socklen_t len, std::shared_ptr<Link> link,
                 const ConnectData& data);
  // For ~LoopbackListener.
  void Unregister(const std::string& key, LoopbackListener* listener);
  // FaultPlan::hold_accepts: lets every held handshake, present and future, finish.
  void ReleaseAccepts() { accepts_released_.store(true, std::memory_order_release); }
  bool accepts_released() const { return accepts_released_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mu_;
  std::atomic<bool> accepts_released_{false};
  FaultPlan plan_;
  std::map<std::string, LoopbackListener*> listeners_;
};

// The process's shared loopback provider (default fault plan), made on first use and never
// destroyed, as the registry's providers are: what GetProvider("loopback") was.
LoopbackProvider* SharedProvider();

}  // namespace san::fabric::loopback
