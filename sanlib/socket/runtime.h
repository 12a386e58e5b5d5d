// Runtime: sanlib's process-wide state -- the configuration, the socket table, the providers, the
// connection and close threads -- created on first use and never destroyed (a preloaded library
// must not depend on static destruction order; the threads are stopped by the exit handler).
//
// Provider choice (SAN_PROVIDER): `auto` carries a connection to a peer on this host over shm, to
// a peer on another host over verbs when an RDMA device routes to it, else kernel TCP; `shm` and
// `verbs` allow only that provider (any other peer is kernel TCP, with the reason); `off` is
// kernel TCP always. The verbs provider is opened on first need (a remote peer, a listener), so a
// process that only talks to its own host never touches libibverbs.
//
// Also installs the process hooks: pthread_atfork (the background threads do not survive fork;
// locks are not held across it) and atexit (open SAN sockets send FIN, closing ones get to post
// it). Thread-safety: Get() is thread-safe; members document their own.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "sanlib/common/config.h"
#include "sanlib/common/file_identity.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"
#include "sanlib/proto/stream.h"
#include "sanlib/socket/close_thread.h"
#include "sanlib/socket/connection_thread.h"
#include "sanlib/socket/socket_table.h"

namespace san {

class Runtime {
 public:
  static Runtime& Get();
  // The runtime if something has made it already, else nullptr (never creates it): the
  // compatibility layer's pass-through test for fds of a process that has no SAN socket.
  static Runtime* IfCreated() { return created_.load(std::memory_order_acquire); }

  const Config& config() const { return config_; }
  SocketTable& table() { return table_; }
  ConnectionThread& connections() { return connections_; }
  CloseThread& closer() { return closer_; }
  // The process this runtime belongs to: set at creation and in every fork child. A caller that
  // sees another pid is a vfork() child borrowing its parent's memory (exec_handoff.h): it must
  // not change anything the parent will find when it resumes.
  int pid() const { return pid_.load(std::memory_order_relaxed); }
  // A missed fork: a child made by a raw clone() (vsftpd's isolate=YES sessions use
  // clone(CLONE_NEWIPC|SIGCHLD)) runs no pthread_atfork handler, so it would go on with the
  // parent's view -- no connection thread of its own (nothing answers its listeners: every SAN
  // client of it waited 5 s, then fell back), the parent's pending channels, the parent's pid.
  // The set-up calls (socket, listen, accept, connect) compare the pid with the kernel's and, on
  // a change, do what the fork child handler does, after resetting the locks it expects held
  // (another thread of the parent may have held them at the clone; the child has no other
  // thread). Not for a vfork child (it shares our memory, and calls none of those). What cannot be
  // reset -- a lock libc's malloc or a provider held on another thread at the moment of a raw
  // clone -- stays the caller's risk, as with any raw clone of a multithreaded process.
  static void CheckMissedFork();
  // Whether this is a vfork() child: Python's subprocess (since 3.10), and any program that
  // vforks, closes and dup2s fds in the child before its exec. It runs in its parent's memory
  // (the socket table, the streams' mappings, the epoll sets) with its own fd table, so sanlib
  // must change nothing there: its close of a SAN socket is the kernel's close of its own copy
  // (san::Close unmapped the parent's segment and sent the peer a FIN: the parent's connection
  // was reset), and its dup and dup2 are the kernel's. One system call in this process
  // (common/this_pid.h: the cached pid is shared with a vfork child); in another one a look at the
  // cache, or, where MADV_WIPEONFORK is refused, a kcmp(KCMP_VM) against ours. Asked only by
  // calls that would change sanlib's state, never on the data path.
  static bool InVforkChild();

  // _exit() and _Exit() (interposed by the compatibility layer): no atexit handler runs, but the
  // process's SAN_REPORT line is still written -- vsftpd's sessions, for one, end with _exit.
  // Nothing else is done: _exit may come from a signal handler or a vfork child, where no lock
  // may be taken; a vfork child (or a raw clone child that never made a set-up call: it still
  // carries its parent's counters) writes nothing.
  static void AtQuickExit();

  // What this process's connections did, written to SAN_REPORT at exit (the transparency tests
  // read it to know a tool was really accelerated). Counted when a connection settles its mode
  // and when its stream leaves the application (close, or exit).
  struct Usage {
    std::atomic<uint64_t> shm_connections{0};
    std::atomic<uint64_t> tcp_connections{0};
    std::atomic<uint64_t> shm_bytes_sent{0};
    std::atomic<uint64_t> shm_bytes_received{0};
    std::atomic<uint64_t> verbs_connections{0};
    std::atomic<uint64_t> verbs_bytes_sent{0};
    std::atomic<uint64_t> verbs_bytes_received{0};
    // Bytes sent from the application's memory (no staging copy: proto::StreamParams::
    // zero_copy_min), on verbs connections.
    std::atomic<uint64_t> verbs_zero_copy_bytes_sent{0};
    void Reset() {
      for (std::atomic<uint64_t>* c : {&shm_connections, &tcp_connections, &shm_bytes_sent,
                                       &shm_bytes_received, &verbs_connections, &verbs_bytes_sent,
                                       &verbs_bytes_received, &verbs_zero_copy_bytes_sent}) {
        if (c->load(std::memory_order_relaxed)) c->store(0);  // a fork child's: no write if 0
      }
    }
  };
  Usage& usage() { return usage_; }
  // SAN_REPORT counts each process's own connections: a fork child starts from zero (what it
  // inherited was counted where it was set up; a connection's bytes are counted by its last
  // holder). The file is opened when the runtime starts and kept, so that a process that
  // changes uid or chroots later still writes its line at exit.
  // A connection settled on `stream` (its provider's counter), or on kernel TCP (nullptr).
  void CountSettled(const proto::Stream* stream);
  void CountFinished(proto::Stream& stream);

  // The provider that would carry a connection to `peer` (shm, else verbs, as SAN_PROVIDER
  // allows), or nullptr with the reason why not (the socket's fallback reason).
  fabric::Provider* ProviderFor(const sockaddr* peer, socklen_t len, std::string* why_not);
  // The shm provider if SAN_PROVIDER allows it and it reaches `peer` (in-band upgrade: shm only).
  fabric::Provider* ShmProviderFor(const sockaddr* peer, socklen_t len, std::string* why_not);
  // The providers whose rendezvous a listener bound to `addr` opens: shm (this host's clients)
  // and verbs (other hosts' clients; not for a loopback address). Empty, with why, if none.
  std::vector<fabric::Provider*> ListenProviders(const sockaddr* addr, socklen_t len,
                                                 std::string* why_not);
  // The shm provider, where SAN_PROVIDER allows it (nullptr with why otherwise): what filed
  // channels are handed between processes with (handover, exec: shm endpoints move, verbs do not).
  fabric::Provider* ListenProvider(std::string* why_not);
  // Whether this process can carry SAN connections at all (nullptr `why_not` untouched if so).
  bool SanEnabled(std::string* why_not);
  // The verbs provider, opened on first call; nullptr with *why_not (WhyUnavailable) without an
  // RDMA device, when it is not built, or when SAN_PROVIDER excludes it.
  fabric::Provider* Verbs(std::string* why_not);
  proto::StreamParams StreamParamsFor(const fabric::Provider& provider) const;

 private:
  Runtime();
  static inline std::atomic<Runtime*> created_{nullptr};
  static void AtExit();
  static void AfterForkChild();
  // Whether the fork in progress is made by a process that never ran a second thread
  // (OnlyThreadEver, common/fork_held_mutex.h, read in the prepare handler): then no lock of ours
  // can be held by anyone else, and the handlers take none. Taken anyway, each lock's page was
  // written by both processes after fork() had made it copy-on-write: a page fault apiece (an
  // accept-then-fork server paid them at every connection).
  static inline bool fork_alone_ = false;
  void AdoptMissedFork();
  void OpenReport();
  void WriteReport();

  const Config& config_;
  SocketTable table_;  // before connections_, which refers to it
  ConnectionThread connections_;
  CloseThread closer_;
  Usage usage_;
  UniqueFd report_fd_;  // SAN_REPORT, opened at start (see usage())
  char prog_[32] = {};  // the program's name when the runtime was made, for the report
  FileIdentity report_id_;
  std::atomic<int> pid_{0};
  fabric::Provider* shm_ = nullptr;
  std::string shm_unavailable_;
  std::atomic<bool> verbs_error_logged_{false};
};

}  // namespace san
