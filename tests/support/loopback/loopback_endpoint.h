// LoopbackEndpoint: one end of an in-process connection, for protocol tests. Same contract as
// every provider (provider.h); messages are copied straight into the peer's posted receive during
// PostSend unless the endpoint's FaultPlan holds, drops or fails them.
//
// Thread-safety: all state is in the shared Link under its mutex, so any thread may call anything
// (the mutex is uncontended in single-threaded tests; this backend is not about speed).
// Ownership: owns its doorbell eventfd and buffer arena; shares the Link with its peer. Destroying
// an endpoint breaks the connection (the peer's receives complete with ECONNRESET).
#pragma once

#include <atomic>
#include <memory>

#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"
#include "support/loopback/fault_plan.h"
#include "support/loopback/link.h"

namespace san::fabric::loopback {

class LoopbackProvider;

class LoopbackEndpoint final : public Endpoint {
 public:
  // `side` 0 = client (fresh link), 1 = server (joins the client's link).
  static Result<std::unique_ptr<LoopbackEndpoint>> Create(LoopbackProvider* provider,
                                                          std::shared_ptr<Link> link, int side,
                                                          const EndpointAttr& attr,
                                                          const FaultPlan& plan);
  ~LoopbackEndpoint() override;

  // Replaces this endpoint's fault plan (and restarts its send numbering).
  void set_fault_plan(const FaultPlan& plan);
  void set_peer_data(const ConnectData& data) { peer_data_ = data; }

  Result<MemoryRegion> AllocateBuffer(size_t length) override;
  Status PostRecv(const RecvWork& work) override;
  Status PostSend(const SendWork& work) override;
  int Poll(Completion* out, int max) override;
  bool Arm() override;
  int notify_fd() const override { return doorbell_.get(); }
  void ClearNotify() override;
  Status Connect(const sockaddr* server, socklen_t len, const ConnectData& data) override;
  Status Accept() override;
  Status Reject(int error) override;
  Status BeginAccept() override;
  Result<bool> FinishAccept() override;
  const ConnectData& peer_data() const override { return peer_data_; }
  void Disconnect() override;
  bool broken() const override;
  uint32_t mtu() const override;
  const char* provider_name() const override { return "loopback"; }
  ProviderKind provider_kind() const override { return ProviderKind::kTest; }
  // Single copy, emulated: the "peer process" is this one, so the write is a memcpy.
  // Tests: WriteWindow calls that claimed a window so far (the claim precedes any hold).
  uint64_t window_claims() const { return window_writes_.load(std::memory_order_acquire); }
  bool CanWriteWindows() override;
  bool CanExposeWindows() const override { return !plan_.no_single_copy; }
  Result<WindowKey> ExposeWindow(void* addr, size_t length) override;
  Result<WindowFate> RevokeWindow() override;
  Result<size_t> WriteWindow(const WindowKey& key, const Segment* segs, int nsegs) override;
  Result<MemoryRegion> RegisterSendMemory(const void* addr, size_t length) override;
  Status DeregisterSendMemory(const MemoryRegion& region) override;
  // Tests: payload bytes PostSend took from registered application memory, and registrations
  // currently held.
  uint64_t in_place_bytes() const { return in_place_bytes_.load(std::memory_order_relaxed); }
  int registered_regions() const;

 private:
  LoopbackEndpoint(LoopbackProvider* provider, std::shared_ptr<Link> link, int side,
                   const EndpointAttr& attr, const FaultPlan& plan, UniqueFd doorbell);
  // All *Locked helpers require link_->mu.
  void BreakLocked(int reason);
  // Copies `data` (gathered from `segments` when `held` is null) into `to`'s next posted receive.
  // EPROTO when there is none or it is too small (the connection breaks, like verbs).
  Status DeliverLocked(Half& to, const SendWork* work, const HeldMessage* held);
  void DeliverHeldLocked(Half& me);
  static void RingLocked(Half& to);

  LoopbackProvider* provider_;
  std::shared_ptr<Link> link_;
  const int side_;
  const EndpointAttr attr_;
  FaultPlan plan_;
  // Answers the request (the verdict the client waits for).
  Status AnswerAccept();
  uint64_t sends_ = 0;         // guarded by link_->mu
  bool accept_begun_ = false;  // BeginAccept under hold_accepts, not finished yet
  UniqueFd doorbell_;
  std::unique_ptr<std::byte[]> arena_;
  std::byte* arena_begin_ = nullptr;  // 64-byte aligned start inside arena_
  size_t arena_used_ = 0;             // guarded by link_->mu
  ConnectData peer_data_;
  // Single copy (receiving thread: generation, exposed; sending thread: writes, refused).
  uint32_t window_generation_ = 0;
  bool window_exposed_ = false;
  std::atomic<uint64_t> window_writes_{0};
  std::atomic<bool> window_refused_{false};
  // Registered application memory (guarded by link_->mu).
  MemoryRegion regions_[kMaxSendRegions] = {};
  uint64_t registrations_ = 0;
  uint32_t next_region_key_ = 0x100;
  std::atomic<uint64_t> in_place_bytes_{0};
};

}  // namespace san::fabric::loopback
