// Address keys: the canonical text form of an IP socket address ("127.0.0.1:5000", "[::1]:5000")
// that names a listener's rendezvous, shared by every backend (shm: the abstract Unix socket name;
// loopback: the in-process registry key).
//
// Thread-safety: pure functions. Ownership: results are returned by value (connection set-up only,
// never on the data path, so the heap is fine here).
// Invariants: an IPv4-mapped IPv6 address ("::ffff:1.2.3.4") is written as its IPv4 form, so a
// listener and a client that spell the same host differently meet at the same key.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "sanlib/common/status.h"

namespace san::fabric {

// "a.b.c.d:port" or "[v6]:port". EAFNOSUPPORT for non-IP families, EINVAL for a short `len`.
Result<std::string> AddressKey(const sockaddr* addr, socklen_t len);

// The keys a client tries, in order: the exact address, the wildcard of its family (a listener
// bound to INADDR_ANY / in6addr_any is reachable through every local address), and for IPv4 also
// the IPv6 wildcard (a dual-stack listener bound to "::").
Status ConnectKeys(const sockaddr* addr, socklen_t len, std::vector<std::string>* keys);

// A rendezvous private to one connection (socket/late_upgrade.h) is named by an address in the
// IPv6 discard prefix 100::/64, which no host uses: its key is tried exactly, never with the
// wildcards (a real listener on the same port must not see such requests).
sockaddr_in6 PrivateRendezvousAddress(uint64_t id, uint16_t port);
bool IsPrivateRendezvous(const sockaddr* addr, socklen_t len);

// True for 127.0.0.0/8, ::1 and their v4-mapped forms.
bool IsLoopbackAddress(const sockaddr* addr, socklen_t len);

// The host's key: AddressKey with the port cleared ("10.0.0.1:0"), so that any port of an address
// matches; "" for a non-IP address. What the providers' "is this address one of ours" caches hold.
std::string HostKey(const sockaddr* addr, socklen_t len);

// HostKey of every IPv4 and IPv6 address of this host's interfaces (getifaddrs) whose interface
// `wanted` accepts (its name); empty if getifaddrs fails.
std::vector<std::string> InterfaceHostKeys(bool (*wanted)(const char* interface_name));

}  // namespace san::fabric
