#include "sanlib/socket/rendezvous_owner.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/process_ended.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/socket/handover.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

namespace san {
namespace {

socklen_t LengthOf(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

// The owner did not hand the channel over because it does not serve this socket any more, or
// cannot be reached at all: the rendezvous has moved or is gone.
bool OwnerLost(int code) { return code == ENXIO || code == ECONNREFUSED || code == EPERM; }

}  // namespace

bool OpenRendezvous(SanSocket& s, int fd, bool* in_use, RendezvousSet set) {
  Runtime& rt = Runtime::Get();
  Result<sockaddr_storage> addr = LocalAddress(fd);
  if (!addr.ok()) return false;
  const socklen_t alen = LengthOf(addr.value());
  std::string why;
  // One rendezvous per provider on the same address and port (shm for this host's clients, the
  // rdma_cm listener for other hosts'), all served by the connection thread for this socket.
  const std::vector<fabric::Provider*> providers =
      rt.ListenProviders(reinterpret_cast<sockaddr*>(&addr.value()), alen, &why);
  if (providers.empty()) {
    if (set != RendezvousSet::kOtherHosts) {  // said once
      SAN_LOG_INFO("fd %d: listening without SAN rendezvous: %s", fd, why.c_str());
    }
    return false;
  }
  bool opened = false;
  for (fabric::Provider* provider : providers) {
    const bool this_host = provider->kind() == fabric::ProviderKind::kShm;
    if (set != RendezvousSet::kAll && this_host != (set == RendezvousSet::kThisHost)) continue;
    // SAN_SETUP=late: this host's clients start on kernel TCP and move later (late_upgrade.h).
    if (rt.config().late_setup && this_host) continue;
    const proto::StreamParams params = rt.StreamParamsFor(*provider);
    Result<std::unique_ptr<fabric::Listener>> listener = provider->Listen(
        reinterpret_cast<sockaddr*>(&addr.value()), alen, proto::Stream::EndpointAttrFor(params));
    if (!listener.ok()) {
      if (listener.status().code() == EADDRINUSE && in_use) {
        *in_use = true;  // its channels are claimed from the process that serves it (below)
        SAN_LOG_INFO("fd %d: %s rendezvous served by another process", fd, provider->name());
        continue;
      }
      SAN_LOG_INFO("fd %d: %s rendezvous unavailable (%s); its clients will use kernel TCP", fd,
                   provider->name(), listener.status().ToString().c_str());
      continue;
    }
    Status st = rt.connections().AddListener(fd, addr.value(), std::move(listener).value(),
                                             provider->capabilities(), params);
    if (st.ok()) {
      opened = true;
    } else {
      SAN_LOG_WARN("fd %d: connection thread: %s", fd, st.ToString().c_str());
    }
  }
  if (opened) {
    s.rendezvous_owner.store(ThisPid());
  } else if (in_use && *in_use) {
    // Served by another process already (a SO_REUSEPORT sibling, a launcher that handed the
    // socket on): its channels are claimed from there.
    if (fabric::Provider* shm = rt.ListenProvider(&why)) {
      s.rendezvous_owner.store(
          shm->RendezvousPid(reinterpret_cast<sockaddr*>(&addr.value()), alen));
    }
  }
  return opened;
}

void TakeOverFrom(SanSocket& ls, int listen_fd, int gone) {
  int seen = gone;
  // One thread of this process does it; the others carry on with what it leaves behind.
  if (!ls.rendezvous_owner.compare_exchange_strong(seen, -1)) return;
  bool in_use = false;
  if (OpenRendezvous(ls, listen_fd, &in_use)) {
    SAN_LOG_INFO("fd %d: took over the SAN rendezvous of pid %d", listen_fd, seen);
    return;
  }
  int now_owner = 0;
  Result<sockaddr_storage> addr = LocalAddress(listen_fd);
  std::string why;
  fabric::Provider* provider = Runtime::Get().ListenProvider(&why);
  if (in_use && addr.ok() && provider) {
    now_owner =
        provider->RendezvousPid(reinterpret_cast<sockaddr*>(&addr.value()), LengthOf(addr.value()));
  }
  ls.rendezvous_owner.store(now_owner);
}

void WatchForeignRendezvous() {
  Runtime& rt = Runtime::Get();
  struct Foreign {
    int fd;
    uint64_t id;
    int owner;
  };
  std::vector<Foreign> foreign;  // gathered first: the takeover and the watch take other locks
  const int self = ThisPid();
  rt.table().ForEachNumber([&](int fd, SanSocket* s) {
    const int owner = s->rendezvous_owner.load();
    if (owner > 0 && owner != self && s->listening.load())
      foreign.push_back(Foreign{fd, s->id, owner});
  });
  if (foreign.empty()) return;
  auto pin = rt.table().Pin();  // a close() deletes sockets only outside it
  for (const Foreign& f : foreign) {
    SanSocket* s = rt.table().Find(f.fd);
    if (!s || s->id != f.id) continue;
    if (ProcessEnded(f.owner)) {
      TakeOverFrom(*s, f.fd, f.owner);
    } else {
      rt.connections().WatchOwner(f.fd, f.id, f.owner);
    }
  }
}

SanSocket* AdoptListener(int fd) {
  int value = 0;
  socklen_t len = sizeof value;
  if (kernel::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value != 1) {
    return nullptr;
  }
  len = sizeof value;
  if (kernel::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) != 0 ||
      (value != AF_INET && value != AF_INET6)) {
    return nullptr;
  }
  len = sizeof value;
  if (kernel::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &value, &len) != 0 || value != IPPROTO_TCP) {
    return nullptr;
  }
  const int fl = kernel::fcntl(fd, F_GETFL, 0);
  SanSocket* s = Track(fd, fl >= 0 && (fl & O_NONBLOCK));
  if (!s) return nullptr;
  s->listening.store(true);
  bool in_use = false;
  OpenRendezvous(*s, fd, &in_use);
  return s;
}

void CheckRendezvousOwner(SanSocket& ls, int listen_fd) {
  const int owner = ls.rendezvous_owner.load();
  // Every accept looks: ThisPid, not getpid (a syscall).
  if (owner != ThisPid() && ProcessEnded(owner)) TakeOverFrom(ls, listen_fd, owner);
}

Result<std::unique_ptr<proto::Stream>> FindChannel(SanSocket& ls, int listen_fd, int conn_fd,
                                                   const proto::FourTuple& tuple) {
  Runtime& rt = Runtime::Get();
  if (std::unique_ptr<proto::Stream> mine = rt.connections().Claim(listen_fd, tuple)) {
    return mine;
  }
  std::string why;
  fabric::Provider* provider = rt.ListenProvider(&why);
  // Twice at most: the first owner may have given the rendezvous up to another process.
  for (int attempt = 0; attempt < 2 && provider; ++attempt) {
    const int owner = ls.rendezvous_owner.load();
    if (owner <= 0 || owner == ThisPid()) break;
    Result<std::unique_ptr<proto::Stream>> claimed =
        ClaimFromOwner(owner, tuple, conn_fd, *provider);
    if (claimed.ok()) return claimed;
    const int code = claimed.status().code();
    if (code == ENOENT) break;  // the owner has no channel for it: a plain client
    if (!OwnerLost(code)) return claimed.status();
    SAN_LOG_INFO("fd %d: the SAN rendezvous owner %d is gone (%s)", listen_fd, owner,
                 claimed.status().ToString().c_str());
    TakeOverFrom(ls, listen_fd, owner);
  }
  return std::unique_ptr<proto::Stream>();
}

}  // namespace san
