// LoopbackListener: a listening address in a LoopbackProvider's in-process registry.
//
// Connect() on a client builds the server endpoint and queues it here; GetRequest() hands it out.
// fd() is an eventfd (semaphore mode) that is readable while requests are queued.
// Thread-safety: Enqueue may be called from any thread; GetRequest from one. Ownership: owns
// queued server endpoints (dropping them refuses the waiting clients); unregisters itself from the
// provider on destruction, so the provider must outlive it.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::loopback {

class LoopbackProvider;

class LoopbackListener final : public Listener {
 public:
  LoopbackListener(LoopbackProvider* provider, std::string key, const EndpointAttr& attr,
                   UniqueFd event);
  ~LoopbackListener() override;

  int fd() const override { return event_.get(); }
  Result<std::unique_ptr<Endpoint>> GetRequest() override;

  const EndpointAttr& attr() const { return attr_; }
  void Enqueue(std::unique_ptr<Endpoint> request);

 private:
  LoopbackProvider* provider_;
  const std::string key_;
  const EndpointAttr attr_;
  UniqueFd event_;
  std::mutex mu_;
  std::deque<std::unique_ptr<Endpoint>> queue_;
};

}  // namespace san::fabric::loopback
