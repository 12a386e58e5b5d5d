// ShmEndpoint: one shm connection (a VI) between two processes of this host.
//
// Data path (per direction; the sender plays the NIC): the receiver posts descriptors
// {offset, length} into its descriptor ring; the sender's PostSend takes the next one, copies the
// payload into the receiver's arena, writes {length, imm} into the receiver's completion ring and,
// if the receiver is armed, rings its eventfd (PostSendFromFile preads the payload straight into
// the receiver's arena instead of copying it). Sends therefore complete inside PostSend; their
// completions are queued locally and reported by Poll. No syscalls, locks, heap or shared-index
// reads on the hot path besides the slot lines themselves (see ring.h).
//
// Thread-safety: one sending thread (PostSend) and one receiving thread (PostRecv, Poll, Arm,
// ClearNotify) at a time; broken() and Disconnect() from any thread. Fork: every mutable field
// lives in the segment or in the LocalState region (MAP_SHARED), the object holds only fds,
// addresses and immutable limits, so a fork child may carry on with the same object (one process
// at a time; the socket layer serialises them).
// Trust: see docs/fabric.md "Validation": a bad value from the peer breaks this connection
// (ECONNRESET), nothing else.
// Ownership: owns the segment mapping, its LocalRegion, the doorbells, the epoll set behind
// notify_fd() and the rendezvous socket. Destroying it does not signal the peer explicitly: the
// peer sees EOF on the rendezvous socket once no process holds it any more.
#pragma once

#include <cstdint>

#include "sanlib/common/shared_mapping.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"
#include "sanlib/fabric/shm/local_state.h"
#include "sanlib/fabric/shm/shm_layout.h"

namespace san::fabric::shm {

class ShmEndpoint final : public Endpoint {
 public:
  enum class Side : int { kClient = 0, kServer = 1 };

  // Everything an endpoint is made of; built by ShmProvider (client) or ShmListener (server).
  struct Parts {
    Side side = Side::kClient;
    EndpointAttr attr;
    Layout layout{};
    SharedMapping segment;
    UniqueFd own_doorbell;   // eventfd the peer rings
    UniqueFd peer_doorbell;  // eventfd we ring
    UniqueFd rendezvous;     // connected Unix socket (server: from the request; client: later)
    ConnectData peer_data;   // server: the client's request data
    uint32_t mtu = 0;
    // Single copy. The peer's pid as SO_PEERCRED gave it at set-up (the only process we ever
    // write into), and ours as the peer's SO_PEERCRED gave it (the only process that may expose
    // windows). 0 = unknown: no single copy. The client learns both in Connect.
    int32_t peer_pid = 0;
    int32_t self_pid_seen = 0;
    UniqueFd proof;  // server, ListenProved: the client's proof descriptor
  };
  // Validates nothing (callers did); fails only for system resources.
  static Result<std::unique_ptr<ShmEndpoint>> Create(Parts parts);
  ~ShmEndpoint() override;

  Result<MemoryRegion> AllocateBuffer(size_t length) override;
  Status PostRecv(const RecvWork& work) override;
  Status PostSend(const SendWork& work) override;
  Status PostSendFromFile(const SendWork& work, const FileSlice& file, FileRead* read) override;
  int Poll(Completion* out, int max) override;
  bool Quiet() override;
  bool Arm() override;
  UniqueFd TakeProof() override { return std::move(parts_.proof); }
  int notify_fd() const override { return epoll_.get(); }
  void ClearNotify() override;
  Status Connect(const sockaddr* server, socklen_t len, const ConnectData& data) override;
  Status FinishConnect(int wait_ms) override;
  Status Accept() override;
  Status Reject(int error) override;
  const ConnectData& peer_data() const override { return parts_.peer_data; }
  void Disconnect() override;
  bool broken() const override;
  uint32_t mtu() const override { return parts_.mtu; }
  const char* provider_name() const override { return "shm"; }
  ProviderKind provider_kind() const override { return ProviderKind::kShm; }
  int32_t peer_process() const override { return parts_.peer_pid; }
  bool ListFds(std::vector<int>* out) const override;
  // Single copy (shm_window.cc): process_vm_writev into the peer's exposed window.
  bool CanWriteWindows() override;
  bool CanExposeWindows() const override;
  Result<WindowKey> ExposeWindow(void* addr, size_t length) override;
  Result<WindowFate> RevokeWindow() override;
  Result<size_t> WriteWindow(const WindowKey& key, const Segment* segs, int nsegs) override;
  // Moving to another process (shm_transfer.cc): the four fds and the LocalState bytes.
  Status Export(EndpointImage* out) override;
  Result<MemoryRegion> Reattach(const MemoryRegion& exported) override;
  static Result<std::unique_ptr<ShmEndpoint>> Import(EndpointImage image);

  // Tests only: the shared segment, to play a hostile peer.
  std::byte* segment_for_testing() const { return base_; }
  const Layout& layout_for_testing() const { return parts_.layout; }
  int32_t peer_pid_for_testing() const { return parts_.peer_pid; }

 private:
  explicit ShmEndpoint(Parts parts, LocalRegion local);
  Status Setup();

  // Marks the connection broken for `reason` (first cause wins), tells the peer (gone flag and
  // doorbell), wakes our own sleeper and shuts the rendezvous socket down. Cold path.
  void Break(int reason) const;
  // A send in the making: the peer's receive it goes into and our send-queue entry.
  struct SendSlot {
    uint64_t pos = 0;    // the peer's receive (our `sent` counter)
    uint64_t qtail = 0;  // our send-queue entry
    uint64_t segment_bytes = 0;
  };
  // Checks a send of the segments plus `extra` bytes, takes the peer's next posted receive and
  // copies the segments into it; returns where the extra bytes go. Nothing is visible to the
  // peer until Publish.
  Result<std::byte*> ClaimPeerReceive(const SendWork& work, uint64_t extra, SendSlot* slot);
  // Completes the message (`length` bytes in all) at the peer and rings it if it sleeps.
  void Publish(const SendSlot& slot, uint64_t length, const SendWork& work);
  // Nonblocking look at the rendezvous socket: EOF or unexpected data -> Break. Rate limited.
  void CheckPeerAlive(bool force) const;
  int PollBroken(Completion* out, int max, int n);
  static void Ring(int eventfd);

  Parts parts_;
  // Client, between Connect's request and the listener's answer (FinishConnect).
  UniqueFd answering_;
  uint64_t answer_deadline_ns_ = 0;
  LocalRegion local_region_;
  UniqueFd epoll_;
  // Cached from the parts (immutable after construction).
  std::byte* base_ = nullptr;
  LocalState* local_ = nullptr;
  uint64_t* send_ids_ = nullptr;
  uint32_t send_queue_mask_ = 0;
  SideBlock* own_ = nullptr;                          // our inbound rings and flags
  SideBlock* peer_ = nullptr;                         // the peer's inbound rings and flags
  size_t own_arena_begin_ = 0, own_arena_end_ = 0;    // offsets, our private copy
  size_t peer_arena_begin_ = 0, peer_arena_end_ = 0;  // offsets, our private copy
  uint64_t own_arena_budget_ = 0;
  uintptr_t exporter_base_ = 0;  // where the segment was mapped in the process that made buffers
};

}  // namespace san::fabric::shm
