#include "support/loopback/loopback_endpoint.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "sanlib/common/clock.h"
#include "support/loopback/loopback_provider.h"

namespace san::fabric::loopback {
namespace {

constexpr int kConnectTimeoutMs = 5000;

uint64_t TotalLength(const SendWork& work) {
  uint64_t total = 0;
  for (int i = 0; i < work.num_segments; ++i) total += work.segments[i].length;
  return total;
}

}  // namespace

Result<std::unique_ptr<LoopbackEndpoint>> LoopbackEndpoint::Create(LoopbackProvider* provider,
                                                                   std::shared_ptr<Link> link,
                                                                   int side,
                                                                   const EndpointAttr& attr,
                                                                   const FaultPlan& plan) {
  if (attr.recv_depth == 0 || attr.send_depth == 0) return Status(EINVAL, "EndpointAttr");
  UniqueFd doorbell(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!doorbell.valid()) return Status::FromErrno("eventfd");
  return std::unique_ptr<LoopbackEndpoint>(
      new LoopbackEndpoint(provider, std::move(link), side, attr, plan, std::move(doorbell)));
}

LoopbackEndpoint::LoopbackEndpoint(LoopbackProvider* provider, std::shared_ptr<Link> link, int side,
                                   const EndpointAttr& attr, const FaultPlan& plan,
                                   UniqueFd doorbell)
    : provider_(provider),
      link_(std::move(link)),
      side_(side),
      attr_(attr),
      plan_(plan),
      doorbell_(std::move(doorbell)),
      arena_(new std::byte[attr.buffer_bytes + 64]) {
  auto raw = reinterpret_cast<uintptr_t>(arena_.get());
  arena_begin_ = arena_.get() + ((64 - raw % 64) % 64);
  std::lock_guard<std::mutex> lock(link_->mu);
  Half& me = link_->half[side_];
  me.present = true;
  me.doorbell = doorbell_.get();
  me.posted.Init(attr.recv_depth);
  me.recv_done.Init(attr.recv_depth);
  me.send_done.Init(attr.send_depth);
}

LoopbackEndpoint::~LoopbackEndpoint() {
  std::lock_guard<std::mutex> lock(link_->mu);
  Half& me = link_->half[side_];
  me.present = false;
  me.doorbell = -1;
  if (link_->verdict == -1 && side_ == 1) link_->verdict = ECONNREFUSED;
  if (link_->half[1 - side_].present) BreakLocked(ECONNRESET);
  link_->verdict_cv.notify_all();
}

void LoopbackEndpoint::set_fault_plan(const FaultPlan& plan) {
  std::lock_guard<std::mutex> lock(link_->mu);
  plan_ = plan;
  sends_ = 0;
}

uint32_t LoopbackEndpoint::mtu() const { return provider_->max_mtu(); }

Result<MemoryRegion> LoopbackEndpoint::AllocateBuffer(size_t length) {
  if (length == 0) return Status(EINVAL, "AllocateBuffer: empty");
  std::lock_guard<std::mutex> lock(link_->mu);
  const size_t size = (length + 63) / 64 * 64;
  if (size > attr_.buffer_bytes - arena_used_) return Status(ENOMEM, "AllocateBuffer");
  MemoryRegion mr{arena_begin_ + arena_used_, length, 1};
  arena_used_ += size;
  return mr;
}

Status LoopbackEndpoint::PostRecv(const RecvWork& work) {
  std::lock_guard<std::mutex> lock(link_->mu);
  if (link_->broken != 0) return Status(ECONNRESET, "PostRecv");
  Half& me = link_->half[side_];
  // Outstanding = posted and not yet reaped (as in shm, a reaped completion frees the slot).
  if (me.posted.size() + me.recv_done.size() >= attr_.recv_depth) {
    return Status(EAGAIN, "PostRecv: receive queue full");
  }
  me.posted.push(work);
  return Status::Ok();
}

void LoopbackEndpoint::RingLocked(Half& to) {
  if (to.armed && to.doorbell >= 0) {
    to.armed = false;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t rc = write(to.doorbell, &one, sizeof(one));
  }
}

void LoopbackEndpoint::BreakLocked(int reason) {
  if (link_->broken != 0) return;
  link_->broken = reason;
  for (Half& h : link_->half) {
    h.held.clear();
    h.armed = true;  // force the ring
    RingLocked(h);
  }
}

Status LoopbackEndpoint::DeliverLocked(Half& to, const SendWork* work, const HeldMessage* held) {
  const uint64_t total = work ? TotalLength(*work) : held->data.size();
  if (to.posted.empty() || to.posted.front().length < total) {
    BreakLocked(EPROTO);
    return Status(EPROTO, to.posted.empty() ? "PostSend: peer has no receive posted"
                                            : "PostSend: message larger than the peer's receive");
  }
  RecvWork r = to.posted.front();
  to.posted.pop();
  auto* dst = static_cast<std::byte*>(r.addr);
  if (work) {
    for (int i = 0; i < work->num_segments; ++i) {
      std::memcpy(dst, work->segments[i].addr, work->segments[i].length);
      dst += work->segments[i].length;
    }
  } else if (total != 0) {
    std::memcpy(dst, held->data.data(), total);
  }
  to.recv_done.push(
      Completion{r.id, Op::kRecv, 0, static_cast<uint32_t>(total), work ? work->imm : held->imm});
  RingLocked(to);
  return Status::Ok();
}

Status LoopbackEndpoint::PostSend(const SendWork& work) {
  std::lock_guard<std::mutex> lock(link_->mu);
  if (link_->broken != 0) return Status(ECONNRESET, "PostSend");
  Half& me = link_->half[side_];
  if (!me.connected) return Status(ENOTCONN, "PostSend");
  if (work.num_segments > kMaxSendSegments) return Status(EINVAL, "PostSend: segments");
  const uint64_t total = TotalLength(work);
  if (total > mtu()) return Status(EMSGSIZE, "PostSend");
  if (me.send_done.full()) return Status(EAGAIN, "PostSend: send queue full");

  const uint64_t n = ++sends_;
  if (n == plan_.fail_send) return Status(plan_.fail_error, "PostSend: injected failure");
  if (n == plan_.break_at_send) {
    BreakLocked(ECONNRESET);
    return Status(ECONNRESET, "PostSend: injected break");
  }
  for (int i = 0; i < work.num_segments; ++i) {
    const Segment& seg = work.segments[i];
    const auto* p = static_cast<const std::byte*>(seg.addr);
    for (const MemoryRegion& r : regions_) {
      if (seg.length != 0 && r.addr != nullptr && p >= r.addr && p <= r.addr + r.length &&
          seg.length <= r.length - static_cast<size_t>(p - r.addr)) {
        in_place_bytes_.fetch_add(seg.length, std::memory_order_relaxed);
        break;
      }
    }
  }
  Half& peer = link_->half[1 - side_];
  if (n != plan_.drop_send) {
    if (plan_.delays() || !peer.held.empty()) {
      HeldMessage h;
      h.ready_poll = peer.polls + plan_.delay_polls + 1;
      h.ready_ns = NowNs() + uint64_t{plan_.delay_us} * 1000;
      h.imm = work.imm;
      h.data.resize(total);
      std::byte* dst = h.data.data();
      for (int i = 0; i < work.num_segments; ++i) {
        std::memcpy(dst, work.segments[i].addr, work.segments[i].length);
        dst += work.segments[i].length;
      }
      peer.held.push_back(std::move(h));
    } else {
      Status s = DeliverLocked(peer, &work, nullptr);
      if (!s.ok()) return s;
    }
  }
  me.send_done.push(work.id);
  return Status::Ok();
}

void LoopbackEndpoint::DeliverHeldLocked(Half& me) {
  const uint64_t now = me.held.empty() ? 0 : NowNs();
  while (!me.held.empty() && link_->broken == 0) {
    HeldMessage& h = me.held.front();
    if (me.polls < h.ready_poll || now < h.ready_ns) return;
    if (!DeliverLocked(me, nullptr, &h).ok()) return;
    me.held.pop_front();
  }
}

int LoopbackEndpoint::Poll(Completion* out, int max) {
  std::lock_guard<std::mutex> lock(link_->mu);
  Half& me = link_->half[side_];
  ++me.polls;
  DeliverHeldLocked(me);
  int n = 0;
  while (n < max && !me.send_done.empty()) {
    out[n++] = Completion{me.send_done.front(), Op::kSend, 0, 0, 0};
    me.send_done.pop();
  }
  while (n < max && !me.recv_done.empty()) {
    out[n++] = me.recv_done.front();
    me.recv_done.pop();
  }
  if (link_->broken != 0) {
    while (n < max && !me.posted.empty()) {
      out[n++] = Completion{me.posted.front().id, Op::kRecv, ECONNRESET, 0, 0};
      me.posted.pop();
    }
  }
  return n;
}

bool LoopbackEndpoint::Arm() {
  std::lock_guard<std::mutex> lock(link_->mu);
  Half& me = link_->half[side_];
  if (link_->broken != 0 || !me.recv_done.empty() || !me.held.empty()) return false;
  me.armed = true;
  return true;
}

void LoopbackEndpoint::ClearNotify() {
  uint64_t value;
  while (read(doorbell_.get(), &value, sizeof(value)) == sizeof(value)) {
  }
}

Status LoopbackEndpoint::Connect(const sockaddr* server, socklen_t len, const ConnectData& data) {
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    if (side_ != 0 || link_->half[1].present || link_->verdict != -1) {
      return Status(EISCONN, "Connect");
    }
  }
  if (data.length > ConnectData::kMax) return Status(EINVAL, "Connect: data length");
  Status s = provider_->Request(server, len, link_, data);
  if (!s.ok()) return s;
  std::unique_lock<std::mutex> lock(link_->mu);
  const bool decided = link_->verdict_cv.wait_for(
      lock, std::chrono::milliseconds(kConnectTimeoutMs), [&] { return link_->verdict != -1; });
  if (!decided) {
    link_->verdict = ETIMEDOUT;
    BreakLocked(ETIMEDOUT);
    return Status(ETIMEDOUT, "Connect: no reply from listener");
  }
  if (link_->verdict != 0) return Status(link_->verdict, "Connect: refused by listener");
  link_->half[0].connected = true;
  return Status::Ok();
}

Status LoopbackEndpoint::Accept() {
  if (plan_.accept_delay_us != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(plan_.accept_delay_us));
  }
  if (plan_.hold_accepts) {  // bounded like any provider's set-up (10 s)
    for (int i = 0; i < 10000 && !provider_->accepts_released(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!provider_->accepts_released()) return Status(ETIMEDOUT, "Accept: held");
  }
  return AnswerAccept();
}

Status LoopbackEndpoint::BeginAccept() {
  if (!plan_.hold_accepts) return Accept();
  if (side_ != 1 || accept_begun_) return Status(EINVAL, "BeginAccept");
  accept_begun_ = true;
  return Status::Ok();
}

Result<bool> LoopbackEndpoint::FinishAccept() {
  if (!accept_begun_) return true;  // answered in BeginAccept
  if (!provider_->accepts_released()) return false;
  accept_begun_ = false;
  Status s = AnswerAccept();
  if (!s.ok()) return s;
  return true;
}

Status LoopbackEndpoint::AnswerAccept() {
  std::lock_guard<std::mutex> lock(link_->mu);
  if (side_ != 1) return Status(EINVAL, "Accept");
  if (link_->verdict != -1) return Status(ECONNRESET, "Accept: client gave up");
  link_->verdict = 0;
  link_->half[1].connected = true;
  link_->verdict_cv.notify_all();
  return Status::Ok();
}

Status LoopbackEndpoint::Reject(int error) {
  std::lock_guard<std::mutex> lock(link_->mu);
  if (side_ != 1 || link_->verdict != -1) return Status(EINVAL, "Reject");
  link_->verdict = error != 0 ? error : ECONNREFUSED;
  BreakLocked(ECONNREFUSED);
  link_->verdict_cv.notify_all();
  return Status::Ok();
}

void LoopbackEndpoint::Disconnect() {
  std::lock_guard<std::mutex> lock(link_->mu);
  BreakLocked(ECONNRESET);
}

bool LoopbackEndpoint::broken() const {
  std::lock_guard<std::mutex> lock(link_->mu);
  return link_->broken != 0;
}

}  // namespace san::fabric::loopback

// ---- Single copy, emulated ---------------------------------------------------------------------
// The same window protocol as fabric/shm/shm_window.cc (see there and docs/fabric.md), with a
// memcpy for process_vm_writev, so protocol tests drive the handshake, the cancel race and the
// refusals in one process.

namespace {

constexpr uint64_t kWindowIdle = 0, kWindowOpen = 1, kWindowBusy = 2, kWindowDone = 3;
constexpr uint64_t WindowWord(uint32_t generation, uint64_t state) {
  return (uint64_t{generation} << 2) | state;
}

}  // namespace

namespace san::fabric::loopback {

bool LoopbackEndpoint::CanWriteWindows() {
  return !plan_.no_single_copy && !plan_.refuse_window_probe &&
         !window_refused_.load(std::memory_order_relaxed);
}

Result<WindowKey> LoopbackEndpoint::ExposeWindow(void* addr, size_t length) {
  if (broken()) return Status(ECONNRESET, "ExposeWindow");
  if (!CanExposeWindows()) return Status(EPERM, "ExposeWindow");
  if (addr == nullptr || length == 0) return Status(EINVAL, "ExposeWindow: empty");
  if (window_exposed_) return Status(EBUSY, "ExposeWindow: a window is already exposed");
  ++window_generation_;
  window_exposed_ = true;
  link_->half[side_].window.store(WindowWord(window_generation_, kWindowOpen),
                                  std::memory_order_release);
  WindowKey key;
  key.addr = reinterpret_cast<uintptr_t>(addr);
  key.length = length;
  key.generation = window_generation_;
  return key;
}

Result<WindowFate> LoopbackEndpoint::RevokeWindow() {
  if (!window_exposed_) return Status(EINVAL, "RevokeWindow: none exposed");
  window_exposed_ = false;
  std::atomic<uint64_t>& w = link_->half[side_].window;
  const uint32_t g = window_generation_;
  uint64_t word = WindowWord(g, kWindowOpen);
  if (w.compare_exchange_strong(word, WindowWord(g, kWindowIdle), std::memory_order_acq_rel)) {
    return WindowFate::kUnused;
  }
  const uint64_t start = NowNs();
  for (;;) {
    word = w.load(std::memory_order_acquire);
    if (word == WindowWord(g, kWindowDone)) return WindowFate::kWritten;
    if (word != WindowWord(g, kWindowBusy) || NowNs() - start > 1'000'000'000) {
      std::lock_guard<std::mutex> lock(link_->mu);
      BreakLocked(ECONNRESET);
      return Status(ECONNRESET, "RevokeWindow");
    }
    std::this_thread::yield();
  }
}

Result<size_t> LoopbackEndpoint::WriteWindow(const WindowKey& key, const Segment* segs, int nsegs) {
  if (broken()) return Status(ECONNRESET, "WriteWindow");
  if (nsegs <= 0 || nsegs > kMaxWindowSegments) return Status(EINVAL, "WriteWindow: segments");
  uint64_t total = 0;
  for (int i = 0; i < nsegs; ++i) total += segs[i].length;
  if (total == 0 || total > key.length)
    return Status(EINVAL, "WriteWindow: larger than the window");
  if (!CanWriteWindows()) return Status(EPERM, "WriteWindow: refused");
  std::atomic<uint64_t>& w = link_->half[1 - side_].window;
  uint64_t word = WindowWord(key.generation, kWindowOpen);
  if (!w.compare_exchange_strong(word, WindowWord(key.generation, kWindowBusy),
                                 std::memory_order_acq_rel)) {
    return Status(ECANCELED, "WriteWindow: window revoked");
  }
  const uint64_t n = window_writes_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (plan_.window_write_hold_us != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(plan_.window_write_hold_us));
  }
  if (plan_.refuse_window_write != 0 && n == plan_.refuse_window_write) {
    window_refused_.store(true, std::memory_order_relaxed);
    w.store(WindowWord(key.generation, kWindowDone), std::memory_order_release);
    return Status(EPERM, "WriteWindow: refused (fault plan)");
  }
  auto* dst = reinterpret_cast<std::byte*>(static_cast<uintptr_t>(key.addr));
  for (int i = 0; i < nsegs; ++i) {
    memcpy(dst, segs[i].addr, segs[i].length);
    dst += segs[i].length;
  }
  w.store(WindowWord(key.generation, kWindowDone), std::memory_order_release);
  return static_cast<size_t>(total);
}

Result<MemoryRegion> LoopbackEndpoint::RegisterSendMemory(const void* addr, size_t length) {
  if (plan_.no_registered_send) return Status(ENOTSUP, "RegisterSendMemory");
  if (addr == nullptr || length == 0 || length > (size_t{1} << 30)) {
    return Status(EINVAL, "RegisterSendMemory");
  }
  // What ibv_reg_mr's pinning finds: every page of the range must be mapped (EFAULT otherwise).
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(addr) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(addr) + length + page - 1) / page * page;
  std::vector<unsigned char> resident((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()) != 0) {
    return Status(errno == ENOMEM ? EFAULT : errno, "RegisterSendMemory: not mapped");
  }
  std::lock_guard<std::mutex> lock(link_->mu);
  if (link_->broken != 0) return Status(ECONNRESET, "RegisterSendMemory");
  if (++registrations_ == plan_.refuse_register) {
    return Status(ENOMEM, "RegisterSendMemory: injected refusal");
  }
  for (MemoryRegion& r : regions_) {
    if (r.addr != nullptr) continue;
    r.addr = static_cast<std::byte*>(const_cast<void*>(addr));
    r.length = length;
    r.key = next_region_key_++;
    return r;
  }
  return Status(EBUSY, "RegisterSendMemory: regions");
}

Status LoopbackEndpoint::DeregisterSendMemory(const MemoryRegion& region) {
  std::lock_guard<std::mutex> lock(link_->mu);
  for (MemoryRegion& r : regions_) {
    if (r.addr != nullptr && r.addr == region.addr && r.length == region.length &&
        r.key == region.key) {
      r = MemoryRegion{};
      return Status::Ok();
    }
  }
  return Status(EINVAL, "DeregisterSendMemory: not a registered region");
}

int LoopbackEndpoint::registered_regions() const {
  std::lock_guard<std::mutex> lock(link_->mu);
  int n = 0;
  for (const MemoryRegion& r : regions_) n += r.addr != nullptr;
  return n;
}

}  // namespace san::fabric::loopback
