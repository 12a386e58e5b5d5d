#include "sanlib/fabric/verbs/verbs_endpoint.h"

#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "sanlib/common/clock.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/fabric/verbs/verbs_library.h"
#include "sanlib/fabric/verbs/verbs_provider.h"
#include "sanlib/fabric/verbs/verbs_wire.h"

namespace san::fabric::verbs {
namespace {

constexpr uint32_t kMaxDepth = 4096;
constexpr size_t kMaxBufferBytes = size_t{1} << 30;
constexpr uint32_t kWantedInline = 256;
constexpr uint64_t kSetupTimeoutNs = 5'000'000'000;
constexpr int kResolveTimeoutMs = 2000;
constexpr uint64_t kSendBit = uint64_t{1} << 63;  // wr_id: sends carry it, receives do not
constexpr uint32_t kEmptyPollsPerCmCheck = 4096;

Status SetNonblocking(int fd) {
  const int fl = kernel::fcntl(fd, F_GETFL);
  if (fl < 0 || kernel::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
      kernel::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
    return Status::FromErrno("fcntl");
  }
  return Status::Ok();
}

Status AddToEpoll(int epoll, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (kernel::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) != 0) return Status::FromErrno("epoll_ctl");
  return Status::Ok();
}

Status CheckAttr(const EndpointAttr& attr) {
  if (attr.recv_depth == 0 || attr.recv_depth > kMaxDepth) return Status(EINVAL, "recv_depth");
  if (attr.send_depth == 0 || attr.send_depth > kMaxDepth) return Status(EINVAL, "send_depth");
  if (attr.buffer_bytes > kMaxBufferBytes) return Status(EINVAL, "buffer_bytes");
  return Status::Ok();
}

size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// What a set-up event that is not the one awaited means for the caller.
int ErrorFor(rdma_cm_event_type type) {
  switch (type) {
    case RDMA_CM_EVENT_REJECTED:
      return ECONNREFUSED;
    case RDMA_CM_EVENT_ADDR_ERROR:
      return ENETUNREACH;
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      return EHOSTUNREACH;
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return ECONNABORTED;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return ENODEV;
    case RDMA_CM_EVENT_DISCONNECTED:
      return ECONNRESET;
    default:
      return 0;  // not fatal: ignore
  }
}

}  // namespace

VerbsEndpoint::VerbsEndpoint(const VerbsProvider& provider, const EndpointAttr& attr)
    : provider_(provider),
      attr_(attr),
      mtu_(VerbsProvider::kMaxMtu),
      fork_generation_(ForkGeneration()) {}

Result<std::unique_ptr<VerbsEndpoint>> VerbsEndpoint::CreateClient(const VerbsProvider& provider,
                                                                   const EndpointAttr& attr) {
  Status s = CheckAttr(attr);
  if (!s.ok()) return s;
  std::unique_ptr<VerbsEndpoint> ep(new VerbsEndpoint(provider, attr));
  s = ep->Init(nullptr);
  if (!s.ok()) return s;
  return ep;
}

Result<std::unique_ptr<VerbsEndpoint>> VerbsEndpoint::CreateServer(const VerbsProvider& provider,
                                                                   const EndpointAttr& attr,
                                                                   rdma_cm_id* id,
                                                                   const ConnectData& peer_data) {
  Status s = CheckAttr(attr);
  std::unique_ptr<VerbsEndpoint> ep;
  if (s.ok()) {
    ep.reset(new VerbsEndpoint(provider, attr));
    ep->peer_data_ = peer_data;
    s = ep->Init(id);  // from here on the endpoint owns `id`
    if (s.ok()) {
      ep->state_ = State::kRequested;
      s = ep->BuildQueuePair();
    }
    if (s.ok()) return ep;
    rdma().reject(id, nullptr, 0);
    return s;
  }
  rdma().reject(id, nullptr, 0);
  rdma().destroy_id(id);
  return s;
}

Status VerbsEndpoint::Init(rdma_cm_id* server_id) {
  recvs_.reset(new PostedRecv[attr_.recv_depth]);
  sends_.reset(new uint64_t[attr_.send_depth]);
  stash_.reset(new ibv_wc[attr_.recv_depth + attr_.send_depth]);
  // The registered mapping: MAP_SHARED so a fork() never splits a page under the NIC (copy on
  // write would leave the device with the child's copy).
  arena_bytes_ = AlignUp(attr_.buffer_bytes, 4096);
  mapping_bytes_ = arena_bytes_ + size_t{attr_.send_depth} * mtu_;
  void* base =
      mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    if (server_id != nullptr) rdma().destroy_id(server_id);
    return Status::FromErrno("mmap(verbs buffers)");
  }
  base_ = static_cast<std::byte*>(base);

  cm_channel_ = rdma().create_event_channel();
  if (cm_channel_ == nullptr) {
    if (server_id != nullptr) rdma().destroy_id(server_id);
    return Status::FromErrno("rdma_create_event_channel");
  }
  if (server_id != nullptr) {
    id_ = server_id;
    if (rdma().migrate_id(id_, cm_channel_) != 0) return Status::FromErrno("rdma_migrate_id");
  } else if (rdma().create_id(cm_channel_, &id_, nullptr, RDMA_PS_TCP) != 0) {
    id_ = nullptr;
    return Status::FromErrno("rdma_create_id");
  }
  Status s = SetNonblocking(cm_channel_->fd);
  if (!s.ok()) return s;
  epoll_.reset(kernel::epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) return Status::FromErrno("epoll/eventfd");
  s = AddToEpoll(epoll_.get(), cm_channel_->fd);
  if (s.ok()) s = AddToEpoll(epoll_.get(), wake_.get());
  return s;
}

Status VerbsEndpoint::BuildQueuePair() {
  ibv_context* context = id_->verbs;
  ibv_pd* pd = context != nullptr ? provider_.PdFor(context) : nullptr;
  if (pd == nullptr) return Status(ENODEV, "verbs: route to a device we did not open");
  comp_channel_ = ibv().create_comp_channel(context);
  if (comp_channel_ == nullptr) return Status::FromErrno("ibv_create_comp_channel");
  Status s = SetNonblocking(comp_channel_->fd);
  if (s.ok()) s = AddToEpoll(epoll_.get(), comp_channel_->fd);
  if (!s.ok()) return s;
  recv_cq_ =
      ibv().create_cq(context, static_cast<int>(attr_.recv_depth), nullptr, comp_channel_, 0);
  send_cq_ =
      ibv().create_cq(context, static_cast<int>(attr_.send_depth), nullptr, comp_channel_, 0);
  if (recv_cq_ == nullptr || send_cq_ == nullptr) return Status::FromErrno("ibv_create_cq");

  ibv_qp_init_attr qa{};
  qa.send_cq = send_cq_;
  qa.recv_cq = recv_cq_;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = attr_.send_depth;
  qa.cap.max_recv_wr = attr_.recv_depth;
  qa.cap.max_send_sge = kMaxSendSegments;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = kWantedInline;
  if (rdma().create_qp(id_, pd, &qa) != 0) {
    qa.cap.max_inline_data = 0;  // a device without inline sends: every send goes by DMA
    if (rdma().create_qp(id_, pd, &qa) != 0) return Status::FromErrno("rdma_create_qp");
  }
  max_inline_ = qa.cap.max_inline_data;
  mr_ = ibv().reg_mr(pd, base_, mapping_bytes_, IBV_ACCESS_LOCAL_WRITE);
  if (mr_ == nullptr) return Status::FromErrno("ibv_reg_mr");
  pd_ = pd;
  qp_ready_ = true;
  // Receives recorded before the QP existed (a client posts before Connect), in order.
  for (; recv_given_to_qp_ < recv_posted_; ++recv_given_to_qp_) {
    s = PostToQp(recv_given_to_qp_);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status VerbsEndpoint::PostToQp(uint64_t pos) {
  const PostedRecv& r = recvs_[pos % attr_.recv_depth];
  ibv_sge sge{reinterpret_cast<uint64_t>(r.addr), r.length, mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = pos;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(id_->qp, &wr, &bad);
  return rc == 0 ? Status::Ok() : Status(rc, "ibv_post_recv");
}

VerbsEndpoint::~VerbsEndpoint() {
  if (InChild()) {
    // The parent's connection: release only this process's copies of plain fds and memory.
    if (cm_channel_ != nullptr) kernel::close(cm_channel_->fd);
    if (comp_channel_ != nullptr) kernel::close(comp_channel_->fd);
    if (base_ != nullptr) munmap(base_, mapping_bytes_);
    return;
  }
  if (id_ != nullptr && state_ == State::kConnected && !disconnected_.exchange(true)) {
    rdma().disconnect(id_);  // the peer gets a DREQ now, not after a timeout
  }
  if (id_ != nullptr && id_->qp != nullptr) rdma().destroy_qp(id_);
  for (ibv_mr* user : user_mrs_) {
    if (user != nullptr) ibv().dereg_mr(user);
  }
  if (mr_ != nullptr) ibv().dereg_mr(mr_);
  if (send_cq_ != nullptr) ibv().destroy_cq(send_cq_);
  if (recv_cq_ != nullptr) ibv().destroy_cq(recv_cq_);
  if (comp_channel_ != nullptr) ibv().destroy_comp_channel(comp_channel_);
  if (id_ != nullptr) rdma().destroy_id(id_);
  if (cm_channel_ != nullptr) rdma().destroy_event_channel(cm_channel_);
  if (base_ != nullptr) munmap(base_, mapping_bytes_);
}

bool VerbsEndpoint::InChild() const { return ForkGeneration() != fork_generation_; }

Result<MemoryRegion> VerbsEndpoint::AllocateBuffer(size_t length) {
  const size_t begin = AlignUp(arena_used_, 64);
  if (length > arena_bytes_ || begin > arena_bytes_ - length) {
    return Status(ENOMEM, "verbs AllocateBuffer");
  }
  arena_used_ = begin + length;
  MemoryRegion r;
  r.addr = base_ + begin;
  r.length = length;
  r.key = mr_ != nullptr ? mr_->lkey : 0;  // a client registers in Connect; keys are not needed
  return r;
}

uint32_t VerbsEndpoint::LkeyFor(const void* addr, size_t length) const {
  const auto* p = static_cast<const std::byte*>(addr);
  if (mr_ == nullptr || p < base_ || p > base_ + mapping_bytes_) return 0;
  if (length > mapping_bytes_ - static_cast<size_t>(p - base_)) return 0;
  return mr_->lkey;
}

uint32_t VerbsEndpoint::UserLkeyFor(const void* addr, size_t length) const {
  const auto* p = static_cast<const std::byte*>(addr);
  for (const ibv_mr* mr : user_mrs_) {
    if (mr == nullptr) continue;
    const auto* begin = static_cast<const std::byte*>(mr->addr);
    if (p >= begin && p <= begin + mr->length &&
        length <= mr->length - static_cast<size_t>(p - begin)) {
      return mr->lkey;
    }
  }
  return 0;
}

Result<MemoryRegion> VerbsEndpoint::RegisterSendMemory(const void* addr, size_t length) {
  if (InChild()) return Status(ECONNRESET, "verbs RegisterSendMemory (fork child)");
  if (!(provider_.capabilities() & kCapRegisteredSend)) {
    return Status(ENOTSUP, "verbs RegisterSendMemory: registration would hide pages from fork");
  }
  if (pd_ == nullptr) return Status(ENOTCONN, "verbs RegisterSendMemory: no device yet");
  if (addr == nullptr || length == 0 || length > kMaxBufferBytes) {
    return Status(EINVAL, "verbs RegisterSendMemory");
  }
  int slot = -1;
  for (int i = 0; i < kMaxSendRegions && slot < 0; ++i) {
    if (user_mrs_[i] == nullptr) slot = i;
  }
  if (slot < 0) return Status(EBUSY, "verbs RegisterSendMemory: regions");
  // Local read only: the NIC reads these pages for our sends; the peer gets no key to them. The
  // kernel pins what is mapped at this moment (EFAULT for a hole).
  ibv_mr* mr = ibv().reg_mr(pd_, const_cast<void*>(addr), length, 0);
  if (mr == nullptr) {
    const int err = errno != 0 ? errno : ENOMEM;
    return Status(err, "ibv_reg_mr(application memory)");
  }
  user_mrs_[slot] = mr;
  MemoryRegion r;
  r.addr = static_cast<std::byte*>(const_cast<void*>(addr));
  r.length = length;
  r.key = mr->lkey;
  return r;
}

Status VerbsEndpoint::DeregisterSendMemory(const MemoryRegion& region) {
  for (ibv_mr*& mr : user_mrs_) {
    if (mr == nullptr || mr->addr != region.addr || mr->length != region.length ||
        mr->lkey != region.key) {
      continue;
    }
    // In a fork child the MR is the parent's: forget it, release nothing.
    if (!InChild()) {
      const int rc = ibv().dereg_mr(mr);
      if (rc != 0) return Status(rc, "ibv_dereg_mr(application memory)");
    }
    mr = nullptr;
    return Status::Ok();
  }
  return Status(EINVAL, "verbs DeregisterSendMemory: not a registered region");
}

Status VerbsEndpoint::PostRecv(const RecvWork& work) {
  if (InChild() || broken_.load(std::memory_order_acquire) != 0) {
    return Status(ECONNRESET, "verbs PostRecv");
  }
  if (recv_posted_ - recv_reaped_ >= attr_.recv_depth) return Status(EAGAIN, "verbs PostRecv");
  // Receive memory must be ours: the NIC writes there.
  const auto* p = static_cast<const std::byte*>(work.addr);
  if (p < base_ || p > base_ + arena_bytes_ ||
      work.length > arena_bytes_ - static_cast<size_t>(p - base_)) {
    return Status(EINVAL, "verbs PostRecv: buffer not from AllocateBuffer");
  }
  const uint64_t pos = recv_posted_;
  recvs_[pos % attr_.recv_depth] = PostedRecv{work.id, work.addr, work.length};
  if (qp_ready_) {
    Status s = PostToQp(pos);
    if (!s.ok()) return s;
    recv_given_to_qp_ = pos + 1;
  }
  recv_posted_ = pos + 1;
  return Status::Ok();
}

Status VerbsEndpoint::PostSend(const SendWork& work) {
  if (InChild()) return Status(ECONNRESET, "verbs PostSend (fork child)");
  if (state_ != State::kConnected) {
    return broken_.load() ? Status(ECONNRESET, "verbs PostSend")
                          : Status(ENOTCONN, "verbs PostSend");
  }
  if (broken_.load(std::memory_order_acquire) != 0) return Status(ECONNRESET, "verbs PostSend");
  if (work.num_segments > kMaxSendSegments) return Status(EINVAL, "verbs PostSend: segments");
  size_t total = 0;
  bool all_registered = true;
  uint32_t keys[kMaxSendSegments] = {};
  bool user[kMaxSendSegments] = {};
  for (int i = 0; i < work.num_segments; ++i) {
    const Segment& seg = work.segments[i];
    total += seg.length;
    if (seg.length == 0) continue;
    keys[i] = LkeyFor(seg.addr, seg.length);
    if (keys[i] == 0) {
      keys[i] = UserLkeyFor(seg.addr, seg.length);
      user[i] = keys[i] != 0;
    }
    if (keys[i] == 0) all_registered = false;
  }
  if (total > mtu_) return Status(EMSGSIZE, "verbs PostSend");
  const uint64_t pos = send_posted_.load(std::memory_order_relaxed);
  if (pos - send_reaped_.load(std::memory_order_acquire) >= attr_.send_depth) {
    return Status(EAGAIN, "verbs PostSend");
  }
  ibv_sge sge[kMaxSendSegments];
  int nsge = 0;
  ibv_send_wr wr{};
  wr.wr_id = pos | kSendBit;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htobe32(work.imm);
  if (total <= max_inline_ || all_registered) {
    // Inline: the CPU copies into the work request now (no key needed, the source is free at
    // once). Registered (our arena, or application memory the caller registered): the NIC reads
    // it in place before the completion, and the caller keeps it unchanged until then.
    const bool inline_send = total <= max_inline_ && total > 0;
    if (inline_send) wr.send_flags |= IBV_SEND_INLINE;
    for (int i = 0; i < work.num_segments; ++i) {
      const Segment& seg = work.segments[i];
      if (seg.length == 0) continue;
      sge[nsge++] = ibv_sge{reinterpret_cast<uint64_t>(seg.addr), seg.length, keys[i]};
      if (inline_send) {
        counters_.inline_bytes += seg.length;
      } else {
        (user[i] ? counters_.in_place_bytes : counters_.arena_bytes) += seg.length;
      }
    }
  } else {
    // Memory the NIC may not read: gather into this queue entry's bounce slot.
    std::byte* slot = base_ + arena_bytes_ + (pos % attr_.send_depth) * mtu_;
    size_t at = 0;
    for (int i = 0; i < work.num_segments; ++i) {
      if (work.segments[i].length == 0) continue;
      std::memcpy(slot + at, work.segments[i].addr, work.segments[i].length);
      at += work.segments[i].length;
    }
    sge[nsge++] =
        ibv_sge{reinterpret_cast<uint64_t>(slot), static_cast<uint32_t>(total), mr_->lkey};
    counters_.bounced_bytes += total;
  }
  wr.sg_list = nsge > 0 ? sge : nullptr;
  wr.num_sge = nsge;
  sends_[pos % attr_.send_depth] = work.id;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(id_->qp, &wr, &bad);
  if (rc != 0) {
    // The QP refused (its state is error, or the device is gone): the connection is over.
    Break(ECONNRESET, "ibv_post_send refused");
    return Status(ECONNRESET, "ibv_post_send");
  }
  send_posted_.store(pos + 1, std::memory_order_release);
  return Status::Ok();
}

int VerbsEndpoint::Poll(Completion* out, int max) {
  if (max <= 0) return 0;
  if (InChild()) {
    broken_.store(ECONNRESET);  // this process's copy only
    return Flush(out, max);
  }
  // The socket layer arms a sleeper's doorbell without the stream's lock, while another thread
  // of the same socket may be polling under it: Arm and Poll share the stash and the rings.
  std::lock_guard<std::mutex> lock(poll_mu_);
  int n = 0;
  auto handle = [&](const ibv_wc& wc) {
    if (wc.wr_id & kSendBit) {
      const uint64_t pos = wc.wr_id & ~kSendBit;
      const uint64_t reaped = send_reaped_.load(std::memory_order_relaxed);
      if (pos != reaped) return;  // already flushed in software
      if (wc.status != IBV_WC_SUCCESS || broken_.load() != 0) {
        if (wc.status != IBV_WC_SUCCESS) {
          SAN_LOG_DEBUG("verbs: send completion %s", ibv().wc_status_str(wc.status));
          Break(ECONNRESET, "send completion error");
          return;  // Flush reports it
        }
      }
      out[n++] = Completion{sends_[pos % attr_.send_depth], Op::kSend, 0, 0, 0};
      send_reaped_.store(pos + 1, std::memory_order_release);
      return;
    }
    const uint64_t pos = wc.wr_id;
    if (pos != recv_reaped_) return;
    if (wc.status != IBV_WC_SUCCESS || !(wc.wc_flags & IBV_WC_WITH_IMM)) {
      SAN_LOG_DEBUG("verbs: receive completion %s (flags %#x)", ibv().wc_status_str(wc.status),
                    wc.wc_flags);
      Break(ECONNRESET, "receive completion error");
      return;
    }
    const PostedRecv& r = recvs_[pos % attr_.recv_depth];
    out[n++] = Completion{r.id, Op::kRecv, 0, wc.byte_len, be32toh(wc.imm_data)};
    ++recv_reaped_;
  };
  while (n < max && stash_next_ < stash_count_) handle(stash_[stash_next_++]);
  if (qp_ready_) {
    ibv_wc wc[16];
    for (ibv_cq* cq : {send_cq_, recv_cq_}) {
      while (n < max) {
        const int want = max - n < 16 ? max - n : 16;
        const int k = ibv_poll_cq(cq, want, wc);
        if (k <= 0) break;
        for (int i = 0; i < k; ++i) handle(wc[i]);
      }
    }
  }
  if (n == 0 && broken_.load(std::memory_order_acquire) == 0 && qp_ready_ &&
      ++empty_polls_ >= kEmptyPollsPerCmCheck) {
    // Peer liveness: a dead peer's DREQ arrives as a cm event; look without blocking.
    empty_polls_ = 0;
    pollfd p{cm_channel_->fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) DrainCmEvents();
  }
  if (n < max && broken_.load(std::memory_order_acquire) != 0) n += Flush(out + n, max - n);
  return n;
}

int VerbsEndpoint::Flush(Completion* out, int max) {
  int n = 0;
  uint64_t s = send_reaped_.load(std::memory_order_relaxed);
  const uint64_t s_end = send_posted_.load(std::memory_order_acquire);
  for (; n < max && s < s_end; ++s) {
    out[n++] = Completion{sends_[s % attr_.send_depth], Op::kSend, ECONNRESET, 0, 0};
  }
  send_reaped_.store(s, std::memory_order_release);
  for (; n < max && recv_reaped_ < recv_posted_; ++recv_reaped_) {
    out[n++] = Completion{recvs_[recv_reaped_ % attr_.recv_depth].id, Op::kRecv, ECONNRESET, 0, 0};
  }
  stash_count_ = stash_next_ = 0;
  return n;
}

bool VerbsEndpoint::Arm() {
  if (InChild() || broken_.load(std::memory_order_acquire) != 0) return false;
  std::lock_guard<std::mutex> lock(poll_mu_);
  if (stash_next_ < stash_count_) return false;
  if (!qp_ready_) return true;
  // Both CQs raise events: receives are what a sleeper waits for, and a failed send is how a
  // break (e.g. no receive posted at the peer) may first show up.
  if (ibv_req_notify_cq(recv_cq_, 0) != 0 || ibv_req_notify_cq(send_cq_, 0) != 0) return false;
  // A completion that arrived before the request raised no event: look once more.
  stash_count_ = stash_next_ = 0;
  const int capacity = static_cast<int>(attr_.recv_depth + attr_.send_depth);
  int k = ibv_poll_cq(recv_cq_, static_cast<int>(attr_.recv_depth), stash_.get());
  if (k > 0) stash_count_ = k;
  bool failed_send = false;
  k = ibv_poll_cq(send_cq_, capacity - stash_count_, stash_.get() + stash_count_);
  for (int i = 0; i < k; ++i) failed_send |= stash_[stash_count_ + i].status != IBV_WC_SUCCESS;
  const bool received = stash_count_ > 0;
  if (k > 0) stash_count_ += k;
  return !received && !failed_send;
}

void VerbsEndpoint::ClearNotify() {
  if (InChild()) return;
  if (comp_channel_ != nullptr) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv().get_cq_event(comp_channel_, &cq, &context) == 0) ibv().ack_cq_events(cq, 1);
  }
  uint64_t v;
  while (kernel::read(wake_.get(), &v, sizeof v) > 0) {
  }
  pollfd p{cm_channel_->fd, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) DrainCmEvents();
}

void VerbsEndpoint::DrainCmEvents() const {
  std::lock_guard<std::mutex> lock(cm_mu_);
  rdma_cm_event* event = nullptr;
  while (rdma().get_cm_event(cm_channel_, &event) == 0) {
    const rdma_cm_event_type type = event->event;
    rdma().ack_cm_event(event);
    if (ErrorFor(type) != 0) {
      Break(ECONNRESET, rdma().event_str(type));
    }
  }
}

void VerbsEndpoint::Break(int reason, const char* why) const {
  int expected = 0;
  if (!broken_.compare_exchange_strong(expected, reason)) return;
  SAN_LOG_DEBUG("verbs: connection broken: %s", why);
  // QP to the error state and a DREQ to the peer, so both sides break (the peer may be asleep).
  if (id_ != nullptr && id_->qp != nullptr && !disconnected_.exchange(true)) rdma().disconnect(id_);
  const uint64_t one = 1;
  if (kernel::write(wake_.get(), &one, sizeof one) < 0) {
    // Cannot fail short of a closed fd; the peer's DREQ or the flush still wakes a sleeper.
  }
}

void VerbsEndpoint::Disconnect() {
  if (InChild()) {
    broken_.store(ECONNRESET);
    return;
  }
  Break(ECONNRESET, "Disconnect()");
}

bool VerbsEndpoint::broken() const {
  if (InChild()) return true;
  if (broken_.load(std::memory_order_acquire) == 0 && cm_channel_ != nullptr &&
      state_ == State::kConnected) {
    pollfd p{cm_channel_->fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) DrainCmEvents();
  }
  return broken_.load(std::memory_order_acquire) != 0;
}

Status VerbsEndpoint::WaitEvent(rdma_cm_event_type want, uint64_t deadline_ns, int* reject_status) {
  std::lock_guard<std::mutex> lock(cm_mu_);
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma().get_cm_event(cm_channel_, &event) == 0) {
      const rdma_cm_event_type type = event->event;
      const int status = event->status;
      rdma().ack_cm_event(event);
      if (type == want) return Status::Ok();
      if (reject_status != nullptr) *reject_status = status;
      const int error = ErrorFor(type);
      if (error != 0) {
        SAN_LOG_DEBUG("verbs: waiting for %s, got %s (status %d)", rdma().event_str(want),
                      rdma().event_str(type), status);
        return Status(error, rdma().event_str(type));
      }
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Status::FromErrno("rdma_get_cm_event");
    }
    const uint64_t now = NowNs();
    if (now >= deadline_ns) return Status(ETIMEDOUT, rdma().event_str(want));
    pollfd p{cm_channel_->fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>((deadline_ns - now) / 1000000) + 1);
  }
}

Status VerbsEndpoint::Connect(const sockaddr* server, socklen_t len, const ConnectData& data) {
  if (InChild()) return Status(ECONNRESET, "verbs Connect (fork child)");
  if (state_ != State::kIdle) return Status(EISCONN, "verbs Connect");
  if (server == nullptr || (server->sa_family != AF_INET && server->sa_family != AF_INET6) ||
      len < (server->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6))) {
    return Status(EAFNOSUPPORT, "verbs Connect");
  }
  state_ = State::kFailed;  // until it succeeds
  const uint64_t deadline = NowNs() + kSetupTimeoutNs;
  if (rdma().resolve_addr(id_, nullptr, const_cast<sockaddr*>(server), kResolveTimeoutMs) != 0) {
    return Status::FromErrno("rdma_resolve_addr");
  }
  Status s = WaitEvent(RDMA_CM_EVENT_ADDR_RESOLVED, deadline);
  if (!s.ok()) return s;
  if (rdma().resolve_route(id_, kResolveTimeoutMs) != 0)
    return Status::FromErrno("rdma_resolve_route");
  s = WaitEvent(RDMA_CM_EVENT_ROUTE_RESOLVED, deadline);
  if (!s.ok()) return s;
  s = BuildQueuePair();
  if (!s.ok()) return s;
  const RequestBlob blob = EncodeRequest(data);
  rdma_conn_param param{};
  param.private_data = blob.bytes;
  param.private_data_len = RequestBlob::kSize;
  param.retry_count = 7;
  param.rnr_retry_count = 0;  // a send with no receive posted breaks the connection at once
  if (rdma().connect(id_, &param) != 0) return Status::FromErrno("rdma_connect");
  int reject_status = 0;
  s = WaitEvent(RDMA_CM_EVENT_ESTABLISHED, deadline, &reject_status);
  if (!s.ok()) return s;
  state_ = State::kConnected;
  return Status::Ok();
}

Status VerbsEndpoint::Accept() {
  Status s = BeginAccept();
  if (!s.ok()) return s;
  // The QP is ready to receive once rdma_accept returns; waiting for ESTABLISHED (the client's
  // RTU) makes our first send find the client's QP ready too (no retransmission timeout).
  accepting_ = false;
  s = WaitEvent(RDMA_CM_EVENT_ESTABLISHED, accept_deadline_ns_);
  if (!s.ok()) return s;
  state_ = State::kConnected;
  return Status::Ok();
}

Status VerbsEndpoint::BeginAccept() {
  if (InChild()) return Status(ECONNRESET, "verbs Accept (fork child)");
  if (state_ != State::kRequested || accepting_) return Status(EINVAL, "verbs Accept");
  state_ = State::kFailed;  // until ESTABLISHED
  rdma_conn_param param{};
  param.retry_count = 7;
  param.rnr_retry_count = 0;
  if (rdma().accept(id_, &param) != 0) return Status::FromErrno("rdma_accept");
  accept_deadline_ns_ = NowNs() + kSetupTimeoutNs;
  accepting_ = true;
  return Status::Ok();
}

Result<bool> VerbsEndpoint::FinishAccept() {
  if (InChild()) return Status(ECONNRESET, "verbs Accept (fork child)");
  if (!accepting_) {
    if (state_ == State::kConnected) return true;
    return Status(EINVAL, "verbs FinishAccept: no accept in progress");
  }
  if (broken_.load(std::memory_order_acquire) != 0) {
    accepting_ = false;
    return Status(ECONNRESET, "verbs FinishAccept");
  }
  // A deadline already passed: one look at what is queued, no waiting.
  Status s = WaitEvent(RDMA_CM_EVENT_ESTABLISHED, 0);
  if (s.code() == ETIMEDOUT) {
    if (NowNs() < accept_deadline_ns_) return false;
    accepting_ = false;
    return s;
  }
  accepting_ = false;
  if (!s.ok()) return s;
  state_ = State::kConnected;
  return true;
}

Status VerbsEndpoint::Reject(int /*error*/) {  // rdma_reject carries no reason: ECONNREFUSED
  if (InChild()) return Status(ECONNRESET, "verbs Reject (fork child)");
  if (state_ != State::kRequested) return Status(EINVAL, "verbs Reject");
  state_ = State::kFailed;
  if (rdma().reject(id_, nullptr, 0) != 0) return Status::FromErrno("rdma_reject");
  return Status::Ok();
}

}  // namespace san::fabric::verbs
