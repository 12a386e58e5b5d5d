// Who serves a listening socket's SAN rendezvous, and how the processes sharing the socket find
// the channel a client set up for the connection they accepted.
//
// listen() opens the rendezvous (one per provider) and this process's connection thread serves
// it: it is the socket's *owner*, and every client's channel is filed there. Processes that share
// the listening socket -- fork children of a prefork server or a daemon, a process it was passed
// to -- accept connections whose channels the owner filed and claim them (handover.h). The owner
// may exit (a daemon's parent, a prefork creator) or close its copy (a creator that becomes a
// client): then the rendezvous is gone, clients fall back to kernel TCP, and a process that
// holds the socket takes the rendezvous over -- it opens it itself, or, if another process of
// the group was first, learns that one's pid from the provider -- so later clients get channels
// again. Which process: one that forked while holding the socket, as soon as the owner exits
// (its connection thread watches the owner: the daemon a daemon's parent leaves behind, nginx's
// master, which never accepts itself), or else the next process that accepts on the socket. A
// client is never refused for any of this: a connection whose channel cannot be found is kernel TCP
// on both ends; only a channel that exists but could not be handed over resets it (the client would
// otherwise wait on a channel nobody reads).
//
// Thread-safety: as the C API. SanSocket::rendezvous_owner is the shared word: the takeover
// claims it with a compare-and-swap, so one thread of a process opens the rendezvous.
#pragma once

#include <memory>

#include "sanlib/common/status.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/san_socket.h"

namespace san {

// Which of a socket's rendezvous to open: this host's (shm), which listen() opens before the
// kernel's listener, the other hosts' (verbs: rdma_cm, which on iWARP takes the TCP port itself),
// opened only once the kernel listens, or all of them.
enum class RendezvousSet { kAll, kThisHost, kOtherHosts };

// Opens the rendezvous of the listening socket `fd` (bound) for every provider of `set` that
// serves its address and records this process as its owner. False if none could be opened
// (`in_use` says whether another process holds it).
bool OpenRendezvous(SanSocket& s, int fd, bool* in_use = nullptr,
                    RendezvousSet set = RendezvousSet::kAll);

// Before an accept on `ls` (fd `listen_fd`) by a process that is not its owner: if the owner
// process is gone, takes the rendezvous over. One kill(2) when the owner is alive.
void CheckRendezvousOwner(SanSocket& ls, int listen_fd);

// The owner `gone` no longer serves the rendezvous of `ls`: opens it here, or learns which
// process of the group did. Nothing if another thread of this process is at it, or did it.
void TakeOverFrom(SanSocket& ls, int listen_fd, int gone);

// Before this process forks: every listening socket whose rendezvous another process serves is
// taken over now if that process is gone, and otherwise watched by this process's connection
// thread (ConnectionThread::WatchOwner), which takes it over when the owner goes. The fork is
// the sign that this process serves the socket through others: nginx's master, left behind by
// the launcher that called listen(), forks its workers and never accepts itself.
void WatchForeignRendezvous();

// The channel for the connection `tuple` accepted on `ls`: filed here, or claimed from the
// owner. nullptr: the client has none (plain, or it fell back): kernel TCP. An error: the client
// has a channel that could not be obtained (the connection must be reset).
Result<std::unique_ptr<proto::Stream>> FindChannel(SanSocket& ls, int listen_fd, int conn_fd,
                                                   const proto::FourTuple& tuple);
// A listening TCP socket this process did not make (inherited over exec, received over
// SCM_RIGHTS, systemd's LISTEN_FDS): tracks it, and learns who serves its rendezvous or opens
// it. nullptr if fd is not an IP TCP listening socket.
SanSocket* AdoptListener(int fd);

}  // namespace san
