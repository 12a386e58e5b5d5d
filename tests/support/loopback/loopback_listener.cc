#include "support/loopback/loopback_listener.h"

#include <unistd.h>

#include <utility>

#include "support/loopback/loopback_provider.h"

namespace san::fabric::loopback {

LoopbackListener::LoopbackListener(LoopbackProvider* provider, std::string key,
                                   const EndpointAttr& attr, UniqueFd event)
    : provider_(provider), key_(std::move(key)), attr_(attr), event_(std::move(event)) {}

LoopbackListener::~LoopbackListener() {
  provider_->Unregister(key_, this);
  // Queued requests die with the queue; each refuses its waiting client.
}

void LoopbackListener::Enqueue(std::unique_ptr<Endpoint> request) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(request));
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t rc = write(event_.get(), &one, sizeof(one));
}

Result<std::unique_ptr<Endpoint>> LoopbackListener::GetRequest() {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return Status(EAGAIN, "GetRequest");
  std::unique_ptr<Endpoint> ep = std::move(queue_.front());
  queue_.pop_front();
  uint64_t value;
  [[maybe_unused]] ssize_t rc = read(event_.get(), &value, sizeof(value));  // semaphore: -1
  return ep;
}

}  // namespace san::fabric::loopback
