// Moving a stream to another process of the same user (stream.h Export / Import): the endpoint's
// image, the state block as bytes, and where the buffers were; the importer checks every index it
// will follow before using them.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "sanlib/common/spin_lock.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/locked.h"
#include "sanlib/proto/stream/state.h"

namespace san::proto {

using stream::kMaxReceives;
using stream::kStagingSlots;
using stream::RecvEntry;

Status Stream::Export(StreamImage* out) {
  if (!(caps_ & fabric::kCapTransferable)) return Status(ENOTSUP, "Stream::Export");
  Locked l(*this);
  // A thread of ours is writing lent bytes out (Borrow): the importer would deliver them again.
  if (l.sh().recv.lent) return Status(EBUSY, "Stream::Export: queued bytes are lent");
  StreamImage image;
  Status st = endpoint_->Export(&image.endpoint);
  if (!st.ok()) return st;
  image.state.resize(sizeof(StreamShared));
  memcpy(image.state.data(), static_cast<const void*>(shared_), sizeof(StreamShared));
  image.recv_region = recv_region_;
  image.staging_region = staging_region_;
  image.params = params_;
  image.provider_caps = caps_;
  *out = std::move(image);
  return Status::Ok();
}

Result<std::unique_ptr<Stream>> Stream::Import(fabric::Provider& provider, StreamImage image) {
  const StreamParams& p = image.params;
  if (image.state.size() != sizeof(StreamShared) || p.ack_threshold == 0 ||
      p.ack_threshold >= p.window || p.window > 255 || p.receive_depth() > kMaxReceives ||
      p.mtu < 64 || image.recv_region.length != size_t{p.receive_depth()} * p.mtu ||
      image.staging_region.length != size_t{kStagingSlots} * p.mtu) {
    return Status(EINVAL, "Stream::Import: image");
  }
  Result<std::unique_ptr<fabric::Endpoint>> ep = provider.Import(std::move(image.endpoint));
  if (!ep.ok()) return ep.status();
  if (p.mtu > ep.value()->mtu()) return Status(EINVAL, "Stream::Import: mtu");
  Result<fabric::MemoryRegion> recv = ep.value()->Reattach(image.recv_region);
  if (!recv.ok()) return recv.status();
  Result<fabric::MemoryRegion> staging = ep.value()->Reattach(image.staging_region);
  if (!staging.ok()) return staging.status();
  std::unique_ptr<Stream> s(new Stream(std::move(ep).value(), image.provider_caps, p));
  void* state = mmap(nullptr, sizeof(StreamShared), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (state == MAP_FAILED) return Status::FromErrno("mmap(stream state)");
  memcpy(state, image.state.data(), sizeof(StreamShared));
  s->shared_ = static_cast<StreamShared*>(state);
  // The exporter held the lock while copying; the connection is ours alone now.
  new (&s->shared_->lock) SpinLock();
  // The indices we will follow came from our own user's process, but a bad one must not become
  // a wild access: the same bounds the stream keeps for itself.
  // No single-copy window crosses a move: the importer is another process (the provider does not
  // let it expose windows, and an advert the exporter saw may be for memory of the exporter's).
  s->shared_->single_copy.win_open = s->shared_->single_copy.win_put = false;
  s->shared_->single_copy.adv_valid = false;
  const StreamShared& sh = *s->shared_;
  if (sh.recv.head >= kMaxReceives || sh.recv.count > p.receive_depth() ||
      (sh.staging.fill_slot != -1 &&
       (sh.staging.fill_slot < 0 || sh.staging.fill_slot >= int32_t{kStagingSlots})) ||
      sh.staging.fill_len > p.mtu) {
    return Status(EINVAL, "Stream::Import: state");
  }
  for (uint32_t i = 0; i < sh.recv.count; ++i) {
    const RecvEntry& e = sh.recv.entries[(sh.recv.head + i) % kMaxReceives];
    if (e.buffer >= p.receive_depth() || e.length > p.mtu || e.offset > e.length) {
      return Status(EINVAL, "Stream::Import: receive queue");
    }
  }
  s->recv_region_ = recv.value();
  s->staging_region_ = staging.value();
  return s;
}

}  // namespace san::proto
