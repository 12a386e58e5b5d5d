// Peer uid: which local user owns the other end of a TCP connection of this process. Used by
// drpcd's Unix-user check (--allow-uid, the alternative to the token), and by the late move to
// shm when SAN_PEER_USERS restricts which users may be SAN peers (socket/late_upgrade.h). The
// same lookup tells the connection thread whether a connection it holds a channel for can still
// be accepted (LookupTcpSocket: its state).
//
// SO_PEERCRED exists for Unix sockets only (sanlib's rendezvous checks it), and gRPC only sees a
// connection's fd. Every SAN connection is also a real kernel TCP
// connection (docs/sockets.md), so one mechanism serves SAN and TCP clients alike: ask the
// kernel (NETLINK_SOCK_DIAG, inet_diag, an exact lookup by 4-tuple) for the socket whose local
// end is our peer's address and whose remote end is ours, and take the uid it reports (the
// socket's owner: the effective uid of the process that created it).
//
// Only when the peer is on this host, which we decide from the addresses alone: the peer is a
// loopback address, or the same address as our end of the connection (a client on this host
// dialling one of its own interface addresses). Anything else is a remote client, whose uid
// means nothing here: no uid. (The kernel drops packets from outside that claim a local source
// address, and the lookup runs in our own network namespace: a client in another namespace, i.e.
// another "host", is never found.)
// Thread-safety: stateless functions (each lookup opens and closes its own netlink socket).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include "sanlib/common/status.h"

namespace san {

// Pure: is a connection between these two ends one within this host (see above)? Both AF_INET
// or both AF_INET6 (IPv4-mapped IPv6 counts as IPv4).
bool PeerIsOnThisHost(const sockaddr_storage& local, const sockaddr_storage& peer);

// The uid owning the socket at `peer` connected to `local` (this process's end). ENOENT: no such
// socket here (remote peer, or it closed already); EPERM: not a connection within this host.
Result<uid_t> LookupPeerUid(const sockaddr_storage& local, const sockaddr_storage& peer);

// The same lookup for a caller that decided by itself that the peer is on this host (sanlib's
// local-address cache knows every interface address, not only loopback and our own).
Result<uid_t> LookupPeerUidHere(const sockaddr_storage& local, const sockaddr_storage& peer);

// The TCP socket of this host (network namespace) bound to `local` and connected to `remote`:
// the uid owning it and its state (TCP_ESTABLISHED, TCP_CLOSE_WAIT, ... of netinet/tcp.h; a
// connection still in a listener's accept queue is found too, and so is a dual-stack socket's
// connection with an IPv4 peer, by its unmapped IPv4 addresses). ENOENT: there is none.
struct TcpSocketFacts {
  uid_t uid;
  int state;
};
Result<TcpSocketFacts> LookupTcpSocket(const sockaddr_storage& local,
                                       const sockaddr_storage& remote);

}  // namespace san
