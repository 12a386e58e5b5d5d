#include "support/loopback/loopback_provider.h"

#include <sys/eventfd.h>

#include <vector>

#include "sanlib/fabric/address.h"
#include "support/loopback/loopback_endpoint.h"
#include "support/loopback/loopback_listener.h"

namespace san::fabric::loopback {

LoopbackProvider::LoopbackProvider(const FaultPlan& plan) : plan_(plan) {}

void LoopbackProvider::set_fault_plan(const FaultPlan& plan) {
  std::lock_guard<std::mutex> lock(mu_);
  plan_ = plan;
}

FaultPlan LoopbackProvider::fault_plan() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_;
}

uint32_t LoopbackProvider::capabilities() const {
  uint32_t caps = kCapSendFromAnyMemory | kCapWaitable;
  if (!fault_plan().lossy()) caps |= kCapReliable;
  if (!fault_plan().no_single_copy) caps |= kCapSingleCopy;
  if (!fault_plan().no_registered_send) caps |= kCapRegisteredSend;
  return caps;
}

bool LoopbackProvider::Reaches(const sockaddr* peer, socklen_t len) const {
  return AddressKey(peer, len).ok();
}

Result<std::unique_ptr<Listener>> LoopbackProvider::Listen(const sockaddr* addr, socklen_t len,
                                                           const EndpointAttr& attr) {
  Result<std::string> key = AddressKey(addr, len);
  if (!key.ok()) return key.status();
  UniqueFd event(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE));
  if (!event.valid()) return Status::FromErrno("eventfd");
  std::lock_guard<std::mutex> lock(mu_);
  if (listeners_.count(key.value())) return Status(EADDRINUSE, "Listen");
  auto listener = std::make_unique<LoopbackListener>(this, key.value(), attr, std::move(event));
  listeners_[key.value()] = listener.get();
  return std::unique_ptr<Listener>(std::move(listener));
}

Result<std::unique_ptr<Endpoint>> LoopbackProvider::CreateEndpoint(const EndpointAttr& attr) {
  Result<std::unique_ptr<LoopbackEndpoint>> ep =
      LoopbackEndpoint::Create(this, std::make_shared<Link>(), 0, attr, fault_plan());
  if (!ep.ok()) return ep.status();
  return std::unique_ptr<Endpoint>(std::move(ep).value());
}

Status LoopbackProvider::Request(const sockaddr* server, socklen_t len, std::shared_ptr<Link> link,
                                 const ConnectData& data) {
  std::vector<std::string> keys;
  Status s = ConnectKeys(server, len, &keys);
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& key : keys) {
    auto it = listeners_.find(key);
    if (it == listeners_.end()) continue;
    Result<std::unique_ptr<LoopbackEndpoint>> ep =
        LoopbackEndpoint::Create(this, std::move(link), 1, it->second->attr(), plan_);
    if (!ep.ok()) return ep.status();
    ep.value()->set_peer_data(data);
    it->second->Enqueue(std::move(ep).value());
    return Status::Ok();
  }
  return Status(ECONNREFUSED, "Connect: no loopback listener");
}

void LoopbackProvider::Unregister(const std::string& key, LoopbackListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = listeners_.find(key);
  if (it != listeners_.end() && it->second == listener) listeners_.erase(it);
}

LoopbackProvider* SharedProvider() {
  static LoopbackProvider* const shared = new LoopbackProvider();
  return shared;
}

}  // namespace san::fabric::loopback
