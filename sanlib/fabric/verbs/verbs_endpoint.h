// VerbsEndpoint: one verbs connection (an RC queue pair) set up through librdmacm.
//
// Resources: its own rdma_cm event channel and cm_id, a completion channel, a send CQ and a
// receive CQ (only the receive CQ is armed: the doorbell is about arriving messages), one RC QP,
// and one MAP_SHARED anonymous mapping registered as a single memory region: the AllocateBuffer
// arena followed by one bounce slot of mtu bytes per send-queue entry.
//
// Data path:
//   PostRecv  -> ibv_post_recv, wr_id = the receive's position; (client before Connect: recorded,
//                posted by Connect once the QP exists). Receive memory must be in the arena; the
//                lkey is found by address, the caller's key is not trusted.
//   PostSend  -> IBV_WR_SEND_WITH_IMM (imm in network byte order on the wire), signalled,
//                wr_id = the send's position. Up to max_inline bytes: IBV_SEND_INLINE straight from
//                the caller's memory. Otherwise segments inside the arena or inside a region of
//                application memory registered by RegisterSendMemory go as they are (no copy:
//                the NIC reads them before the send completes), and a send with any other segment
//                is gathered into the bounce slot of its send-queue entry (so
//                kCapSendFromAnyMemory holds). Keys are found by address, never trusted.
//   RegisterSendMemory -> ibv_reg_mr(pd, addr, length, 0): local read only (the NIC reads it for
//                sends; no remote access, so nothing the peer does can touch it), one MR per call,
//                at most kMaxSendRegions; DeregisterSendMemory -> ibv_dereg_mr. No cache (why:
//                docs/protocol.md "Large messages over verbs").
//   Poll      -> ibv_poll_cq on both CQs; positions map back to the caller's ids through two small
//                local rings, so a late or foreign completion is recognised and dropped.
//   Arm       -> ibv_req_notify_cq(recv CQ), then polls once more (a completion that landed
//                before the request would raise no event): found -> kept for Poll, false.
// notify_fd() is an epoll set of the completion channel, the rdma_cm event channel (a DISCONNECTED
// event is how a peer's death or Disconnect arrives) and an eventfd Break() rings.
//
// Breaking: any error completion, a DISCONNECTED / DEVICE_REMOVAL event or Disconnect() moves the
// QP to the error state and sends a DREQ (rdma_disconnect), so the peer breaks too. Completions
// are then reported as the contract says (provider.h): what the CQs still hold that succeeded,
// then every other outstanding send and receive with ECONNRESET, from the local rings (not relying
// on the device's flush). Unlike shm, a send that finds no posted receive, or one too small, is
// detected by the peer's NIC: PostSend succeeds and the break arrives as an error completion (RNR
// retry count 0: no retries).
//
// Fork: verbs objects belong to the process that made them. In a fork child every call behaves as
// on a broken connection (Post* ECONNRESET, Poll flushes, broken() true) and the destructor
// releases nothing of the parent's (no DREQ, no QP destroy through the shared uverbs file).
//
// Thread-safety: one sending thread (PostSend, RegisterSendMemory, DeregisterSendMemory) and one
// receiving thread (PostRecv, Poll, ClearNotify) at a time; Arm() from any thread, also while
// another polls (the socket layer arms sleepers without the stream's lock: Poll and Arm share a
// mutex); broken() and Disconnect() from any thread (rdma_cm events are processed under a mutex).
// Ownership: owns every resource above; destroying it disconnects.
#pragma once

#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::verbs {

class VerbsProvider;

class VerbsEndpoint final : public Endpoint {
 public:
  // A client endpoint: its own event channel and cm_id; the QP comes in Connect (the device is
  // known only once the address is resolved).
  static Result<std::unique_ptr<VerbsEndpoint>> CreateClient(const VerbsProvider& provider,
                                                             const EndpointAttr& attr);
  // A server endpoint for a connection request: takes over `id` (moved to a channel of its own)
  // and builds the QP at once. `peer_data` is the decoded request.
  static Result<std::unique_ptr<VerbsEndpoint>> CreateServer(const VerbsProvider& provider,
                                                             const EndpointAttr& attr,
                                                             rdma_cm_id* id,
                                                             const ConnectData& peer_data);
  ~VerbsEndpoint() override;

  Result<MemoryRegion> AllocateBuffer(size_t length) override;
  Status PostRecv(const RecvWork& work) override;
  Status PostSend(const SendWork& work) override;
  int Poll(Completion* out, int max) override;
  bool Arm() override;
  int notify_fd() const override { return epoll_.get(); }
  void ClearNotify() override;
  Status Connect(const sockaddr* server, socklen_t len, const ConnectData& data) override;
  Status Accept() override;
  Status Reject(int error) override;
  // rdma_accept now; FinishAccept looks (without blocking) for ESTABLISHED, the client's RTU,
  // and gives ETIMEDOUT once the set-up limit has passed.
  Status BeginAccept() override;
  Result<bool> FinishAccept() override;
  const ConnectData& peer_data() const override { return peer_data_; }
  void Disconnect() override;
  bool broken() const override;
  uint32_t mtu() const override { return mtu_; }
  const char* provider_name() const override { return "verbs"; }
  ProviderKind provider_kind() const override { return ProviderKind::kVerbs; }
  Result<MemoryRegion> RegisterSendMemory(const void* addr, size_t length) override;
  Status DeregisterSendMemory(const MemoryRegion& region) override;

  // How PostSend moved payload bytes so far (sending thread; for tests and benchmarks).
  struct SendCounters {
    uint64_t inline_bytes = 0;    // IBV_SEND_INLINE: copied into the work request
    uint64_t arena_bytes = 0;     // read in place from AllocateBuffer memory
    uint64_t in_place_bytes = 0;  // read in place from registered application memory
    uint64_t bounced_bytes = 0;   // copied into a bounce slot first
  };
  const SendCounters& send_counters() const { return counters_; }
  // Application regions registered now (sending thread; tests).
  int registered_send_regions() const {
    int n = 0;
    for (const ibv_mr* mr : user_mrs_) n += mr != nullptr;
    return n;
  }

 private:
  enum class State : uint8_t { kIdle, kRequested, kConnected, kFailed };
  struct PostedRecv {
    uint64_t id;
    void* addr;
    uint32_t length;
  };

  VerbsEndpoint(const VerbsProvider& provider, const EndpointAttr& attr);
  Status Init(rdma_cm_id* server_id);
  // The device is known (server: at once; client: after route resolution): CQs, QP, memory
  // registration, and the receives recorded so far.
  Status BuildQueuePair();
  Status PostToQp(uint64_t pos);  // the recorded receive at `pos`, to the QP
  // Waits (bounded) for the next event on our cm channel; returns its type and status.
  Status WaitEvent(rdma_cm_event_type want, uint64_t deadline_ns, int* reject_status = nullptr);
  // Reads pending cm events without blocking; breaks on the ones that end the connection.
  void DrainCmEvents() const;
  void Break(int reason, const char* why) const;  // `why`: for the debug log
  bool InChild() const;
  uint32_t LkeyFor(const void* addr, size_t length) const;  // 0 = outside our registered memory
  // The lkey of the application region holding [addr, addr+length); 0 = none.
  uint32_t UserLkeyFor(const void* addr, size_t length) const;
  int Flush(Completion* out, int max);

  const VerbsProvider& provider_;
  const EndpointAttr attr_;
  const uint32_t mtu_;
  const uint32_t fork_generation_;
  ConnectData peer_data_;

  rdma_event_channel* cm_channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_comp_channel* comp_channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* user_mrs_[kMaxSendRegions] = {};  // RegisterSendMemory (sending thread)
  SendCounters counters_;
  bool qp_ready_ = false;
  uint32_t max_inline_ = 0;
  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd: Break() rings our own sleeper

  // The registered mapping: [arena | bounce slots].
  std::byte* base_ = nullptr;
  size_t arena_bytes_ = 0;
  size_t mapping_bytes_ = 0;
  size_t arena_used_ = 0;

  State state_ = State::kIdle;
  bool accepting_ = false;  // BeginAccept done, ESTABLISHED not seen yet
  uint64_t accept_deadline_ns_ = 0;
  // Receives: positions [recv_reaped_, recv_posted_) are outstanding; ring indexed mod recv_depth.
  std::unique_ptr<PostedRecv[]> recvs_;
  uint64_t recv_posted_ = 0, recv_reaped_ = 0, recv_given_to_qp_ = 0;
  // Sends: positions [send_reaped_, send_posted_) are outstanding; ring of caller ids.
  std::unique_ptr<uint64_t[]> sends_;
  std::atomic<uint64_t> send_posted_{0};
  std::atomic<uint64_t> send_reaped_{0};
  // Receive completions Arm() found, kept for the next Poll.
  std::unique_ptr<ibv_wc[]> stash_;
  int stash_count_ = 0, stash_next_ = 0;
  uint32_t empty_polls_ = 0;

  std::mutex poll_mu_;                             // Poll and Arm (the stash, the CQs, the rings)
  mutable std::mutex cm_mu_;                       // rdma_cm event processing, Break
  mutable std::atomic<int> broken_{0};             // the first cause, 0 while healthy
  mutable std::atomic<bool> disconnected_{false};  // rdma_disconnect done
};

}  // namespace san::fabric::verbs
