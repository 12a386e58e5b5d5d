// The shm rendezvous: how a client finds a listener and hands it a connection's segment.
//
// A listener at IP address A, port P opens an abstract Unix socket (SOCK_SEQPACKET) named
// "\0sanlib/shm/<AddressKey(A:P)>". Abstract names belong to the network namespace, which is the
// scope we want (another namespace is another host). The client tries the exact key, then the
// wildcards (see ConnectKeys), sends one RequestMessage with three fds over SCM_RIGHTS
// (segment memfd, client doorbell, server doorbell) and waits for one ReplyMessage. The connected
// Unix socket then stays open for the connection's life: EOF on it means the peer is gone.
//
// Messages never leave the host: fixed-width fields in native byte order, versioned, size-checked.
// Thread-safety: stateless functions on caller-owned fds. Every fd received is owned (UniqueFd).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::shm {

constexpr uint64_t kRendezvousMagic = 0x515245534e415300ull;  // "\0SANSERQ"
constexpr uint32_t kRendezvousVersion = 1;
constexpr int kRequestFds = 3;     // segment memfd, client doorbell, server doorbell
constexpr int kMaxRequestFds = 4;  // and the client's proof (RequestMessage::kHasProof)
constexpr int kConnectTimeoutMs = 5000;

struct RequestMessage {
  uint64_t magic;
  uint32_t version;
  uint32_t ring_slots;
  uint64_t arena_bytes[2];  // client's, server's
  uint8_t data_length;
  uint8_t data[ConnectData::kMax];
  uint8_t flags;  // kHasProof
  uint8_t reserved[2];
  // The pid SO_PEERCRED gave the client for the listener (single copy: the server exposes windows
  // only from that process, the one the client will write into). 0 = unknown.
  int32_t seen_pid;
};
static_assert(sizeof(RequestMessage) == 88);
constexpr uint8_t kHasProof = 1;  // a fourth descriptor follows: ConnectData::proof_fd

struct ReplyMessage {
  uint64_t magic;
  int32_t error;     // 0 = accepted, else an errno (ECONNREFUSED for Reject)
  int32_t seen_pid;  // the pid SO_PEERCRED gave the server for the client (as above); 0 = unknown
};
static_assert(sizeof(ReplyMessage) == 16);

// The abstract socket address for a key; `len` receives the exact address length.
void RendezvousAddress(const std::string& key, sockaddr_storage* addr, socklen_t* len);

// A nonblocking listening socket for `key`. EADDRINUSE if another listener holds it.
Result<UniqueFd> ListenRendezvous(const std::string& key);

// A connected (blocking, CLOEXEC) socket to the listener for `server`, trying ConnectKeys in
// order. ECONNREFUSED when nobody listens at any of them.
Result<UniqueFd> ConnectRendezvous(const sockaddr* server, socklen_t len);

// One message with up to `num_fds` descriptors attached.
Status SendMessage(int sock, const void* msg, size_t len, const int* fds, int num_fds);

// One message of exactly `len` bytes, nonblocking. EAGAIN: nothing yet; ECONNRESET: EOF;
// EPROTO: wrong size, truncated control data or not `num_fds` fds (or `num_fds + 1` if
// `may_add_one`; all received fds are closed then). On success `fds[0..n)` own the received
// descriptors and *received (optional) says n.
Status ReceiveMessage(int sock, void* msg, size_t len, UniqueFd* fds, int num_fds,
                      bool may_add_one = false, int* received = nullptr);

// EPERM unless the socket's peer runs as our effective uid.
Status CheckPeerCredentials(int sock);
// The pid the kernel recorded for the socket's peer (SO_PEERCRED: at connect() for a client, at
// listen() for a listener); 0 if unknown.
int32_t PeerPid(int sock);

// EPROTO unless `fd` is an eventfd; makes it nonblocking (the peer created it).
Status CheckEventFd(int fd);

}  // namespace san::fabric::shm
