// san_upgrade(): moves an established kernel TCP connection onto a SAN channel, negotiated in band
// by both ends (DESIGN.md "Connection establishment", point 4; messages in proto/upgrade_wire.h).
//
//   both:      Hello ->            <- Hello        same host and netns, both shm-capable? else
//   ENOTSUP roles:     the end with the lower (address, port) listens, the other connects listener:
//   Offer{rendezvous} ->                (a private shm rendezvous on a random 127/8 key) connector:
//   rendezvous connect with the TCP 4-tuple as request data listener:  checks the 4-tuple, accepts,
//   sends WAKEUP both:      Result ->           <- Result       both 0: the socket is SAN from now
//   on
//
// Every read is bounded (kDeadlineMs); on any failure both ends end up with the fd still plain TCP
// and the same bytes consumed, so the application can carry on over TCP.
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "sanlib/common/clock.h"
#include "sanlib/common/fnv1a.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/small_file.h"
#include "sanlib/proto/upgrade_wire.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/deadline_io.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

namespace san {
namespace {

constexpr int kDeadlineMs = 5000;

template <typename Msg, void (*Encode)(const Msg&, std::byte*)>
Status SendMsg(int fd, const Msg& m, uint64_t deadline_ns) {
  std::byte buf[Msg::kSize];
  Encode(m, buf);
  return SendAll(fd, buf, sizeof buf, deadline_ns);
}

template <typename Msg, Result<Msg> (*Decode)(const std::byte*, size_t)>
Result<Msg> RecvMsg(int fd, uint64_t deadline_ns) {
  std::byte buf[Msg::kSize];
  Status st = RecvAll(fd, buf, sizeof buf, deadline_ns);
  if (!st.ok()) return st;
  return Decode(buf, sizeof buf);
}

uint64_t BootIdHash() {
  const std::string id = FirstLineOf("/proc/sys/kernel/random/boot_id");
  return Fnv1a(id.data(), id.size());
}

proto::UpgradeHello OwnHello(bool shm_usable) {
  proto::UpgradeHello h;
  struct stat st {};
  if (shm_usable && stat("/proc/self/ns/net", &st) == 0) {
    h.flags = proto::UpgradeHello::kFlagShm;
    h.netns_dev = st.st_dev;
    h.netns_inode = st.st_ino;
    h.boot_id = BootIdHash();
  }
  return h;
}

// A private rendezvous: a random key in 127/8 nobody else listens on.
Result<std::unique_ptr<fabric::Listener>> ListenPrivately(fabric::Provider& provider,
                                                          const proto::StreamParams& params,
                                                          sockaddr_in* where) {
  Status last(EADDRINUSE, "san_upgrade rendezvous");
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r) r = static_cast<uint32_t>(NowNs());
    *where = sockaddr_in{};
    where->sin_family = AF_INET;
    where->sin_addr.s_addr = htonl(0x7f000000u | ((r >> 8) & 0xffffffu));
    where->sin_port = htons(static_cast<uint16_t>(1024 + (r % 64512u)));
    Result<std::unique_ptr<fabric::Listener>> l = provider.Listen(
        reinterpret_cast<sockaddr*>(where), sizeof *where, proto::Stream::EndpointAttrFor(params));
    if (l.ok() || l.status().code() != EADDRINUSE) return l;
    last = l.status();
  }
  return last;
}

// Listening side: offers a rendezvous, accepts the connector's channel if its request names this
// very TCP connection. Gives up early if the connector reports failure instead of connecting.
Result<std::unique_ptr<proto::Stream>> ServeChannel(int fd, fabric::Provider& provider,
                                                    const proto::FourTuple& own,
                                                    uint64_t deadline_ns) {
  const proto::StreamParams params = Runtime::Get().StreamParamsFor(provider);
  proto::UpgradeOffer offer;
  Result<std::unique_ptr<fabric::Listener>> listener =
      ListenPrivately(provider, params, &offer.rendezvous);
  if (!listener.ok()) offer.status = listener.status().code();
  Status st = SendMsg<proto::UpgradeOffer, proto::EncodeUpgradeOffer>(fd, offer, deadline_ns);
  if (!st.ok()) return st;
  if (!listener.ok()) return listener.status();
  for (;;) {
    Result<std::unique_ptr<fabric::Endpoint>> request = listener.value()->GetRequest();
    if (request.ok()) {
      Result<proto::FourTuple> tuple = proto::DecodeConnectRequest(request.value()->peer_data());
      if (!tuple.ok() || !proto::SameAddress(tuple->client, own.server) ||
          !proto::SameAddress(tuple->server, own.client)) {
        request.value()->Reject(ECONNREFUSED);  // not our peer: keep waiting for the right one
        continue;
      }
      Result<std::unique_ptr<proto::Stream>> stream =
          proto::Stream::Create(std::move(request).value(), provider.capabilities(), params);
      if (!stream.ok()) return stream.status();
      st = stream.value()->endpoint().Accept();
      if (st.ok()) st = stream.value()->Start();
      if (!st.ok()) return st;
      return stream;
    }
    if (!request.status().would_block()) return request.status();
    // A connector that could not connect says so on the TCP connection instead.
    pollfd p[2] = {{listener.value()->fd(), POLLIN, 0}, {fd, POLLIN, 0}};
    const uint64_t now = NowNs();
    if (now >= deadline_ns) return Status(ETIMEDOUT, "san_upgrade rendezvous");
    const int rc = kernel::poll(p, 2, static_cast<int>((deadline_ns - now) / 1000000) + 1);
    if (rc < 0 && errno != EINTR) return Status::FromErrno("poll");
    if (rc > 0 && p[1].revents && !p[0].revents)
      return Status(ECONNABORTED, "san_upgrade: peer gave up");
  }
}

Result<std::unique_ptr<proto::Stream>> ConnectChannel(int fd, fabric::Provider& provider,
                                                      const proto::FourTuple& own,
                                                      uint64_t deadline_ns) {
  Result<proto::UpgradeOffer> offer =
      RecvMsg<proto::UpgradeOffer, proto::DecodeUpgradeOffer>(fd, deadline_ns);
  if (!offer.ok()) return offer.status();
  if (offer->status != 0) return Status(offer->status, "san_upgrade: peer could not listen");
  Result<std::unique_ptr<proto::Stream>> stream = ConnectStream(
      provider, reinterpret_cast<const sockaddr*>(&offer->rendezvous), sizeof(sockaddr_in), own);
  if (!stream.ok()) return stream.status();
  if (Status st = stream.value()->Start(); !st.ok()) return st;
  return stream;
}

}  // namespace

int Upgrade(int fd) {
  Runtime& rt = Runtime::Get();
  SanSocket* s = rt.table().Find(fd);
  if (s && s->mode.load(std::memory_order_acquire) == SocketMode::kShm) return 0;
  int type = 0;
  socklen_t tlen = sizeof type;
  if (kernel::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0) return -1;  // EBADF, ENOTSOCK
  Result<sockaddr_storage> local = LocalAddress(fd);
  Result<sockaddr_storage> peer = PeerAddress(fd);
  if (type != SOCK_STREAM || !local.ok() || !peer.ok() ||
      (local->ss_family != AF_INET && local->ss_family != AF_INET6) || (s && s->listening.load())) {
    errno = peer.ok() || !local.ok() ? EINVAL : ENOTCONN;
    return -1;
  }
  if (!s) {
    // An inherited connection (inetd's fd 0, a passed fd): manage it from now on.
    const int fl = kernel::fcntl(fd, F_GETFL, 0);
    s = Track(fd, fl >= 0 && (fl & O_NONBLOCK));
    if (!s) {
      errno = EMFILE;
      return -1;
    }
  }
  // A late move (late_upgrade.h) must not happen beside the in-band one: one that has not begun
  // is given up (the peer, asked the same, does the same); one under way is finished (the peer
  // finishes it in its own san_upgrade), and only if it fails do the ends talk in band.
  if (LatePending(*s) && !FinishLateUpgrade(*s))
    EndLateUpgrade(*s, false, "moved in band (san_upgrade)");
  if (s->mode.load(std::memory_order_acquire) == SocketMode::kShm) return 0;
  const uint64_t deadline = NowNs() + uint64_t{kDeadlineMs} * 1000000;
  std::string why;
  // In-band upgrade is shm only (same host): a remote peer stays TCP here even with verbs.
  fabric::Provider* provider =
      rt.ShmProviderFor(reinterpret_cast<sockaddr*>(&peer.value()), sizeof(sockaddr_storage), &why);
  const proto::UpgradeHello mine = OwnHello(provider != nullptr);
  Status st = SendMsg<proto::UpgradeHello, proto::EncodeUpgradeHello>(fd, mine, deadline);
  Result<proto::UpgradeHello> theirs =
      st.ok() ? RecvMsg<proto::UpgradeHello, proto::DecodeUpgradeHello>(fd, deadline)
              : Result<proto::UpgradeHello>(st);
  if (!theirs.ok()) {
    errno = theirs.status().code() == EPROTO ? EPROTO : theirs.status().code();
    return -1;
  }
  const bool both = (mine.flags & theirs->flags & proto::UpgradeHello::kFlagShm) &&
                    proto::SameHost(mine, theirs.value());
  if (!both) {
    if (s->mode.load() == SocketMode::kUnconnected) {
      Settle(*s, nullptr,
             provider ? "san_upgrade: peer cannot use shm (not sanlib, or not local)"
                      : "san_upgrade: " + why);
    }
    errno = ENOTSUP;
    return -1;
  }
  proto::FourTuple own;
  own.client = local.value();
  own.server = peer.value();
  Result<std::unique_ptr<proto::Stream>> stream =
      AddressLess(own.client, own.server) ? ServeChannel(fd, *provider, own, deadline)
                                          : ConnectChannel(fd, *provider, own, deadline);
  proto::UpgradeResult result;
  result.status = stream.ok() ? 0 : (stream.status().code() > 0 ? stream.status().code() : EPROTO);
  st = SendMsg<proto::UpgradeResult, proto::EncodeUpgradeResult>(fd, result, deadline);
  Result<proto::UpgradeResult> peer_result =
      st.ok() ? RecvMsg<proto::UpgradeResult, proto::DecodeUpgradeResult>(fd, deadline)
              : Result<proto::UpgradeResult>(st);
  if (!stream.ok() || !peer_result.ok() || peer_result->status != 0) {
    if (stream.ok()) stream.value()->Abort();
    SAN_LOG_INFO("fd %d: san_upgrade failed: %s", fd,
                 (!stream.ok()        ? stream.status()
                  : !peer_result.ok() ? peer_result.status()
                                      : Status(peer_result->status, "peer"))
                     .ToString()
                     .c_str());
    errno = ENOTSUP;
    return -1;
  }
  Settle(*s, std::move(stream).value(), "");  // a connection counted as TCP counts as shm now
  if (!s->nonblocking.load()) WaitForWindow(*s);
  return 0;
}

}  // namespace san
