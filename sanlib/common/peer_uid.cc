#include "sanlib/common/peer_uid.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "sanlib/common/inet_address.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/unique_fd.h"

namespace san {
namespace {

using Endpoint = InetAddress;  // IPv4-mapped IPv6 unmapped

bool Reduce(const sockaddr_storage& ss, Endpoint* e) {
  const std::optional<InetAddress> a = ReduceInet(ss);
  if (a) *e = *a;
  return a.has_value();
}

bool IsLoopback(const Endpoint& e) {
  if (e.family == AF_INET) return e.bytes[0] == 127;
  static const uint8_t kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return memcmp(e.bytes, kLoop6, 16) == 0;
}

size_t AddrLen(int family) { return family == AF_INET ? 4 : 16; }

}  // namespace

bool PeerIsOnThisHost(const sockaddr_storage& local, const sockaddr_storage& peer) {
  Endpoint l, p;
  if (!Reduce(local, &l) || !Reduce(peer, &p) || l.family != p.family) return false;
  return IsLoopback(p) || memcmp(l.bytes, p.bytes, AddrLen(l.family)) == 0;
}

Result<uid_t> LookupPeerUid(const sockaddr_storage& local, const sockaddr_storage& peer) {
  if (!PeerIsOnThisHost(local, peer)) return Status(EPERM, "peer uid: not a local connection");
  return LookupPeerUidHere(local, peer);
}

Result<uid_t> LookupPeerUidHere(const sockaddr_storage& local, const sockaddr_storage& peer) {
  // The peer's socket: its local end is our peer, its remote end is us.
  Result<TcpSocketFacts> facts = LookupTcpSocket(peer, local);
  if (!facts.ok()) return facts.status();
  return facts->uid;
}

Result<TcpSocketFacts> LookupTcpSocket(const sockaddr_storage& local,
                                       const sockaddr_storage& remote) {
  Endpoint bound, connected;
  if (!Reduce(local, &bound) || !Reduce(remote, &connected) || bound.family != connected.family) {
    return Status(EAFNOSUPPORT, "TCP socket lookup: addresses");
  }
  // An IPv4-mapped connection lives in the IPv6 table: look it up the way it was made.
  const int table = remote.ss_family;

  // The kernel's calls throughout (common/kernel.h): this runs inside sanlib (a move's first
  // step), where the compat layer's interposed calls have no business with netlink sockets.
  UniqueFd nl(kernel::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return Status::FromErrno("TCP socket lookup: socket(NETLINK_SOCK_DIAG)");
  // Bounded wait for the one answer: the kernel answers at once.
  const timeval wait{1, 0};
  if (kernel::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) != 0) {
    return Status::FromErrno("TCP socket lookup: setsockopt(SO_RCVTIMEO)");
  }
  struct {
    nlmsghdr nh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nh.nlmsg_len = sizeof msg;
  msg.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nh.nlmsg_flags = NLM_F_REQUEST;  // an exact lookup, not a dump
  msg.nh.nlmsg_seq = 1;
  msg.req.sdiag_family = static_cast<uint8_t>(table);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  msg.req.id.idiag_sport = htons(bound.port);
  msg.req.id.idiag_dport = htons(connected.port);
  msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (table == AF_INET) {
    memcpy(msg.req.id.idiag_src, bound.bytes, 4);
    memcpy(msg.req.id.idiag_dst, connected.bytes, 4);
  } else {
    // The table's own form of the addresses (mapped stays mapped).
    const auto* pl = reinterpret_cast<const sockaddr_in6*>(&local);
    const auto* ll = reinterpret_cast<const sockaddr_in6*>(&remote);
    memcpy(msg.req.id.idiag_src, &pl->sin6_addr, 16);
    memcpy(msg.req.id.idiag_dst, &ll->sin6_addr, 16);
  }
  sockaddr_nl to_kernel{};
  to_kernel.nl_family = AF_NETLINK;
  if (kernel::sendto(nl.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&to_kernel),
                     sizeof to_kernel) != static_cast<ssize_t>(sizeof msg)) {
    return Status::FromErrno("TCP socket lookup: sendto(netlink)");
  }
  // One answer: the socket (inet_diag_msg) or an error (NLMSG_ERROR, e.g. -ENOENT).
  alignas(nlmsghdr) char buf[8192];
  const ssize_t n = kernel::recv(nl.get(), buf, sizeof buf, 0);
  if (n < 0 && errno == EAGAIN) return Status(ETIMEDOUT, "TCP socket lookup: netlink answer");
  if (n < 0) return Status::FromErrno("TCP socket lookup: recv(netlink)");
  int len = static_cast<int>(n);
  for (const nlmsghdr* h = reinterpret_cast<const nlmsghdr*>(buf); NLMSG_OK(h, len);
       h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) break;
      const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      return Status(err->error ? -err->error : ENOENT, "TCP socket lookup: inet_diag lookup");
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      continue;
    }
    const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
    // The kernel matched on the 4-tuple; check it is the one we asked for all the same.
    if (m->id.idiag_sport != htons(bound.port) || m->id.idiag_dport != htons(connected.port))
      continue;
    return TcpSocketFacts{static_cast<uid_t>(m->idiag_uid), m->idiag_state};
  }
  return Status(ENOENT, "TCP socket lookup: inet_diag lookup");
}

}  // namespace san
