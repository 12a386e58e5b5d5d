// The fabric provider interface: a narrow, VIA/verbs-shaped message interface that every backend
// (shm, loopback, later verbs) implements and the protocol layer drives.
//
// Model (VIA / ibverbs RC):
//   Provider   -- opened once per process; says what it can reach and what it can do
//   (capabilities). Listener   -- the rendezvous for one listening address; a request becomes a
//   server Endpoint. Endpoint   -- one reliable connection (a VI / RC QP): a send queue, a receive
//   queue and one
//                 completion queue, plus a waitable doorbell for sleeping on receive completions.
//
// The pre-posting constraint holds for every backend: each send consumes exactly one receive the
// peer posted earlier, in posting order. A send finding no posted receive breaks the connection
// (both sides see error completions) -- the protocol layer's window guarantees it never happens.
//
// Connection set-up is two-phase on both sides so receives are posted before anything can arrive:
//   client: CreateEndpoint -> AllocateBuffer/PostRecv -> Connect(server, private data)
//   server: Listener::GetRequest -> AllocateBuffer/PostRecv -> Accept() (or Reject())
// rdma_cm maps onto this directly (rdma_connect / rdma_get_request + rdma_accept).
//
// Thread-safety: an Endpoint may be used by one sending thread and one receiving/polling thread at
// a time (the socket layer serialises the rest). Post*/Poll never block and never allocate on the
// heap. A peer is never trusted: indices and lengths it controls are checked against our own copy
// of the limits and a violation breaks only this connection. Ownership: buffers from AllocateBuffer
// live as long as the Endpoint and are in shared memory, so a fork() child sees the same pages as
// its parent.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/file_slice.h"

namespace san::fabric {

enum Capability : uint32_t {
  kCapReliable = 1u << 0,           // lossless, in order; Poll never reports loss of a message
  kCapSendFromAnyMemory = 1u << 1,  // send segments need no registration (key may be 0), and the
                                    // source may be reused as soon as PostSend returns
  kCapSingleCopy = 1u << 2,         // one-sided writes into a window the peer exposes (the
                                    // Endpoint's *Window methods; docs/fabric.md "Single copy")
  kCapWaitable = 1u << 3,           // notify_fd() works with poll/epoll
  kCapTransferable = 1u << 4,       // a connected endpoint can move to another process (Export)
  kCapRegisteredSend = 1u << 5,     // PostSend reads segments in application memory registered
                                    // by RegisterSendMemory in place (no staging copy); the memory
                                    // must stay unchanged until the send's completion
  kCapSendFromFile = 1u << 6,       // PostSendFromFile reads file bytes straight into the peer's
                                    // receive buffer (no copy in our memory first)
};

// Memory the provider can send from and receive into.
struct MemoryRegion {
  std::byte* addr = nullptr;
  size_t length = 0;
  uint32_t key = 0;  // provider's handle (verbs lkey); 0 = not registered
};

// One scatter/gather element of a send.
struct Segment {
  const void* addr = nullptr;
  uint32_t length = 0;
  uint32_t key = 0;  // from a MemoryRegion, or 0 with kCapSendFromAnyMemory
};

constexpr int kMaxSendSegments = 4;

struct SendWork {
  uint64_t id = 0;   // returned in the send's completion
  uint32_t imm = 0;  // 32-bit immediate delivered with the message (packet type etc.)
  uint8_t num_segments = 0;
  Segment segments[kMaxSendSegments];
};

struct RecvWork {
  uint64_t id = 0;  // returned in the completion of the message that lands here
  void* addr = nullptr;
  uint32_t length = 0;
  uint32_t key = 0;  // from a MemoryRegion
};

// What the receiving side tells its peer (through the protocol, e.g. in a packet) so the peer can
// write straight into memory of the receiver's process: RDMA-write-shaped (verbs: addr + rkey).
// Peer-supplied when it arrives: a writer only ever targets the process it validated at set-up,
// and never writes more than `length`.
struct WindowKey {
  uint64_t addr = 0;        // start of the window in the exposing process's address space
  uint64_t length = 0;      // bytes it may receive
  uint32_t generation = 0;  // names this exposure; a key of an earlier one never matches
};

// How an exposed window ended (RevokeWindow).
enum class WindowFate : uint8_t {
  kUnused,   // nothing was written, and from now on nothing can be
  kWritten,  // the peer finished a write into it (how much, the peer says in its next message)
};

constexpr int kMaxWindowSegments = 16;

// Registrations of application memory an endpoint holds at once (RegisterSendMemory).
constexpr int kMaxSendRegions = 4;

enum class Op : uint8_t { kSend, kRecv };

struct Completion {
  uint64_t id = 0;
  Op op = Op::kSend;
  int error = 0;        // 0, or an errno (ECONNRESET: connection broken; later work is flushed)
  uint32_t length = 0;  // bytes received (receives only)
  uint32_t imm = 0;     // immediate value (receives only)
};

// Opaque bytes carried with a connection request and reply (rdma_cm private data: keep it small).
struct ConnectData {
  static constexpr size_t kMax = 48;
  uint8_t length = 0;
  uint8_t bytes[kMax] = {};
  // Optional, for a listener opened with ListenProved: a descriptor the client holds that proves
  // who it is (the socket layer sends the kernel TCP socket the channel stands beside). Not
  // owned; the server side receives its own copy (Endpoint::TakeProof).
  int proof_fd = -1;
  // How long Connect may wait for the listener's answer; 0: the provider's own bound (5 s for
  // shm). A late upgrade waits little: its caller is an application's data call.
  int timeout_ms = 0;
  // Connect returns EINPROGRESS once the request is sent, and Endpoint::FinishConnect takes the
  // answer (still within timeout_ms): a late upgrade's caller is an application's data call,
  // which must not wait while another process builds its half. A provider that cannot take the
  // answer later ignores it (its Connect waits, as without it).
  bool answer_later = false;
  // Optional: the rendezvous connection Provider::Dial opened for this Connect, so that a client
  // builds its endpoint only once a listener has answered. Connect owns it from the call on
  // (takes it over, or closes it when it fails first). Only an endpoint of the provider that
  // dialed is given one. -1: Connect opens its own.
  int dialed_fd = -1;
};

// A connected endpoint packed to move to another process of the same user (kCapTransferable): the
// fds it is made of (duplicates, owned here; passed over SCM_RIGHTS) and its private state as
// bytes. Only the same provider in the receiving process can Import it.
struct EndpointImage {
  std::vector<UniqueFd> fds;
  std::vector<std::byte> state;
};

struct EndpointAttr {
  uint32_t send_depth = 64;        // send work requests outstanding at once
  uint32_t recv_depth = 35;        // receives posted at once (the protocol's P)
  size_t buffer_bytes = 4u << 20;  // total AllocateBuffer space this endpoint may hand out
};

// Which fabric a provider, or the endpoint it made, is: what the layers above branch on (shm only
// for the late set-up, verbs reported as SAN_MODE_VERBS), never the name, which is for reports.
enum class ProviderKind { kShm, kVerbs, kTest };

class Endpoint {
 public:
  virtual ~Endpoint() = default;

  // Memory for receive buffers and send staging, registered with this endpoint, in a shared mapping
  // (fork-safe). Carved from the endpoint's budget (EndpointAttr::buffer_bytes); 64-byte aligned.
  virtual Result<MemoryRegion> AllocateBuffer(size_t length) = 0;

  // Queues a receive. EAGAIN if the receive queue is full; ECONNRESET once the connection broke.
  virtual Status PostRecv(const RecvWork& work) = 0;
  // Queues a send; every send yields exactly one completion, in posting order. EAGAIN if the send
  // queue is full (poll completions and retry). EMSGSIZE if the payload exceeds mtu().
  virtual Status PostSend(const SendWork& work) = 0;
  // kCapSendFromFile: as PostSend, with the file's bytes read straight into the message after the
  // segments (one copy: page cache to the peer's buffer). Posts exactly the bytes the file gave
  // (`read->bytes`, possibly fewer than asked), or nothing when it gave none (`read->error`) --
  // then the Status is Ok and nothing changed. The read happens inside the call, under whatever
  // lock the caller holds: callers pass `nowait` and read ahead outside their lock on EAGAIN.
  virtual Status PostSendFromFile(const SendWork& work, const FileSlice& file, FileRead* read) {
    (void)work;
    (void)file;
    read->bytes = 0;
    read->error = 0;
    return Status(ENOTSUP, "Endpoint::PostSendFromFile");
  }
  // Reaps up to `max` completions into `out`; returns how many. Never blocks.
  virtual int Poll(Completion* out, int max) = 0;
  // True if nothing came from the peer since the last Poll: a Poll now would find no receive
  // completion and the endpoint not broken (only, maybe, completions of the caller's own sends,
  // which change nothing the peer did). Known without the caller's lock; may be called
  // concurrently with Poll. False whenever the endpoint cannot tell cheaply (the default): the
  // caller then looks the slow way.
  virtual bool Quiet() { return false; }

  // Doorbell protocol: Arm() requests a wake-up on the next receive completion and returns false if
  // one is already waiting (then do not sleep: Poll instead). After a true return, sleeping on
  // notify_fd() (POLLIN) cannot miss a completion that arrives later. ClearNotify() consumes it.
  virtual bool Arm() = 0;
  virtual int notify_fd() const = 0;
  virtual void ClearNotify() = 0;

  // Client side, after the initial receives are posted: connect to the listener at `server`,
  // handing `data` to it. Blocks for the rendezvous only (bounded). ECONNREFUSED: no SAN listener.
  virtual Status Connect(const sockaddr* server, socklen_t len, const ConnectData& data) = 0;
  // After a Connect that returned EINPROGRESS (ConnectData::answer_later): takes the listener's
  // answer, waiting at most `wait_ms` (0: a look). EINPROGRESS: not yet, and Connect's bound has
  // not passed; otherwise what Connect would have returned. Ok if Connect already finished.
  virtual Status FinishConnect(int wait_ms) {
    (void)wait_ms;
    return Status::Ok();
  }
  // Server side (from Listener::GetRequest), after the initial receives are posted.
  virtual Status Accept() = 0;
  // Refuses the request; the client's Connect fails with `error` (ECONNREFUSED: refused; EDQUOT:
  // the listener's process has no fds to spare for a channel, socket/fd_budget.h) where the
  // provider can say why (shm), ECONNREFUSED otherwise.
  virtual Status Reject(int error) = 0;
  // Server side, for a caller that serves many handshakes at once (the socket layer's connection
  // thread): BeginAccept answers the request without waiting for the client's last message;
  // FinishAccept then says whether the connection is established (true), not yet (false: call
  // again once notify_fd() is readable, or after a while -- it also enforces the set-up limit,
  // ETIMEDOUT), or failed. Accept() is the two in one. The defaults suit providers whose Accept
  // does not wait for the peer: all the work in BeginAccept.
  virtual Status BeginAccept() { return Accept(); }
  virtual Result<bool> FinishAccept() { return true; }
  // The request's data (server side) or the reply's (client side, empty for shm).
  virtual const ConnectData& peer_data() const = 0;
  // Server side of a ListenProved listener: the client's proof descriptor (once; invalid after,
  // and for other endpoints). The caller checks it and Rejects the request if it proves nothing.
  virtual UniqueFd TakeProof() { return UniqueFd(); }

  // Abortive disconnect: the peer's outstanding and later work completes with ECONNRESET.
  virtual void Disconnect() = 0;
  // True once the peer is known gone or the connection broke. May make one nonblocking syscall;
  // for cold paths (close thread, set-up), not the data path.
  virtual bool broken() const = 0;

  virtual uint32_t mtu() const = 0;
  // The name of the provider that made this endpoint (Provider::name(): "shm", "verbs", ...), for
  // reports: which fabric a socket's channel runs on.
  virtual const char* provider_name() const = 0;
  virtual ProviderKind provider_kind() const = 0;
  // The pid of the process at the other end when the connection was set up (shm: SO_PEERCRED on
  // the rendezvous), 0 where unknown. It may have handed the connection on since. Cheap.
  virtual int32_t peer_process() const { return 0; }
  // Appends the fds this endpoint's calls use (shm: segment, doorbells, rendezvous, the epoll set
  // behind notify_fd), so a caller can check that a process still holds all of them; returns
  // false where the provider cannot list them (its calls then touch more than fds).
  virtual bool ListFds(std::vector<int>* out) const {
    (void)out;
    return false;
  }

  // ---- Single copy (kCapSingleCopy; every method has a "not supported" default) ----------------
  // A receiver exposes one window (the application's buffer) while it waits; the peer, holding
  // the key, writes into it at most once; the receiver revokes it before its call returns. The
  // revocation is race-free: after RevokeWindow returns, nothing will land in the window.
  //
  // Whether this side can write into the peer's windows. The first call may make one syscall (shm:
  // a probe the kernel must permit); false for good after any refusal (WriteWindow's EPERM too).
  virtual bool CanWriteWindows() { return false; }
  // Whether the peer could write into a window this process exposes (shm: only the process the
  // peer validated at set-up, not a fork child or an importer). Cheap: no syscall.
  virtual bool CanExposeWindows() const { return false; }
  // Receiving thread. Exposes [addr, addr+length); at most one window at a time (a second Expose
  // before RevokeWindow is EBUSY). The memory must stay valid until RevokeWindow returns.
  virtual Result<WindowKey> ExposeWindow(void* addr, size_t length) {
    (void)addr;
    (void)length;
    return Status(ENOTSUP, "Endpoint::ExposeWindow");
  }
  // Receiving thread. Ends the exposed window. If the peer is writing at that moment, waits for
  // the write to finish (a correct writer takes one syscall); a write that does not finish within
  // a bound (1 s) or a peer that dies or scribbles the window's state breaks the connection
  // (ECONNRESET) -- the only case where this returns before the writer is known to be done.
  // EINVAL when no window is exposed.
  virtual Result<WindowFate> RevokeWindow() { return Status(ENOTSUP, "Endpoint::RevokeWindow"); }
  // Sending thread. Writes `segs` (total <= key.length) into the peer's window named by `key` in
  // one go and returns how many bytes landed (all of them unless the peer's memory ends early).
  // ECANCELED: the window was revoked (or `key` is stale); nothing was written. Any other error
  // (EPERM, ENOSYS, ESRCH, EFAULT...): nothing usable was written, the window is spent, and for
  // EPERM/ENOSYS CanWriteWindows() is false from now on. Never breaks the connection itself.
  virtual Result<size_t> WriteWindow(const WindowKey& key, const Segment* segs, int nsegs) {
    (void)key;
    (void)segs;
    (void)nsegs;
    return Status(ENOTSUP, "Endpoint::WriteWindow");
  }

  // ---- Sends from registered application memory (kCapRegisteredSend) --------------------------
  // Sending thread. Registers [addr, addr+length) so that PostSend reads segments inside it where
  // they are instead of copying them into a staging slot. Until the completion of every send that
  // used it the caller must neither change nor unmap the memory (the device reads it any time
  // before). The region is one-shot: the caller deregisters it once those sends completed (or the
  // connection broke). Nothing is cached: a later registration of the same addresses pins the
  // pages mapped there then (an application may unmap and remap between calls). A segment's key
  // is not trusted: PostSend finds the region by address and copies a segment outside every
  // registered region as before. At most kMaxSendRegions at once (EBUSY beyond).
  // EFAULT: the memory is not mapped; ENOMEM/EAGAIN/EPERM: the device or the kernel refused
  // (pinned-memory limit). A refusal changes nothing else: the connection goes on.
  virtual Result<MemoryRegion> RegisterSendMemory(const void* addr, size_t length) {
    (void)addr;
    (void)length;
    return Status(ENOTSUP, "Endpoint::RegisterSendMemory");
  }
  // Sending thread. Ends a registration (EINVAL if `region` is not one). After it returns the
  // device reads nothing more there: a send still outstanding that used it fails, which breaks
  // the connection, so callers wait for the completions first and only skip that wait once the
  // connection is broken anyway.
  virtual Status DeregisterSendMemory(const MemoryRegion& region) {
    (void)region;
    return Status(ENOTSUP, "Endpoint::DeregisterSendMemory");
  }

  // Moving a connected endpoint to another process (kCapTransferable; ENOTSUP otherwise). The
  // caller guarantees nobody uses this endpoint during Export and that it is only destroyed, never
  // used, afterwards: the importer carries on from exactly this state. Connection set-up only.
  virtual Status Export(EndpointImage* out) {
    (void)out;
    return Status(ENOTSUP, "Endpoint::Export");
  }
  // In an imported endpoint: the memory a region the exporter got from AllocateBuffer is at here.
  // EINVAL if the region is not one of this endpoint's buffers.
  virtual Result<MemoryRegion> Reattach(const MemoryRegion& exported) {
    (void)exported;
    return Status(ENOTSUP, "Endpoint::Reattach");
  }
};

class Listener {
 public:
  virtual ~Listener() = default;
  // Readable (POLLIN) when GetRequest may have something. The connection thread polls this.
  virtual int fd() const = 0;
  // The next connection request as a server Endpoint (post receives, then Accept or Reject);
  // EAGAIN when none is waiting.
  virtual Result<std::unique_ptr<Endpoint>> GetRequest() = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual const char* name() const = 0;
  virtual ProviderKind kind() const = 0;
  virtual uint32_t capabilities() const = 0;
  virtual uint32_t max_mtu() const = 0;
  // Whether a listener at `peer` could be reached by this provider (shm: an address of this host in
  // this network namespace). Cheap enough to call per connect.
  virtual bool Reaches(const sockaddr* peer, socklen_t len) const = 0;
  // Opens the rendezvous for a listening socket bound to `addr` (port must be set).
  virtual Result<std::unique_ptr<Listener>> Listen(const sockaddr* addr, socklen_t len,
                                                   const EndpointAttr& attr) = 0;
  // The process whose Listener holds the rendezvous for `addr` now (a listening socket shared by
  // several processes: whoever serves it), 0 if none or the provider cannot tell. Called on the
  // slow path of an accept whose channel is elsewhere; may cost a few system calls.
  // A rendezvous whose clients are admitted by proof rather than by user: any user's request is
  // taken if it carries ConnectData::proof_fd, which the caller then checks (a connection private
  // to two processes that already talk TCP may cross users: socket/late_upgrade.h). Providers
  // without it open an ordinary Listen.
  virtual Result<std::unique_ptr<Listener>> ListenProved(const sockaddr* addr, socklen_t len,
                                                         const EndpointAttr& attr) {
    return Listen(addr, len, attr);
  }
  virtual int RendezvousPid(const sockaddr* addr, socklen_t len) const {
    (void)addr;
    (void)len;
    return 0;
  }
  // A client endpoint, not yet connected.
  virtual Result<std::unique_ptr<Endpoint>> CreateEndpoint(const EndpointAttr& attr) = 0;
  // Connects to the rendezvous at `server` and sends nothing: ECONNREFUSED at once when no
  // listener is there, before the caller built an endpoint (whose Connect then takes the fd:
  // ConnectData::dialed_fd). ENOTSUP where the provider has no such step (Connect does it all).
  virtual Result<UniqueFd> Dial(const sockaddr* server, socklen_t len) {
    (void)server;
    (void)len;
    return Status(ENOTSUP, "Provider::Dial");
  }
  // Rebuilds an endpoint another process Exported (kCapTransferable). Validates the image: the
  // sender is a process of our user, but a malformed image must fail (EINVAL), never crash.
  virtual Result<std::unique_ptr<Endpoint>> Import(EndpointImage image) {
    (void)image;
    return Status(ENOTSUP, "Provider::Import");
  }
};

}  // namespace san::fabric
