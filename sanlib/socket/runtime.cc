#include "sanlib/socket/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "sanlib/common/clock.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/file_identity.h"
#include "sanlib/common/fork_held_mutex.h"
#include "sanlib/common/fork_path.h"
#include "sanlib/common/log.h"
#include "sanlib/common/raw_syscall.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/fabric/address.h"
#include "sanlib/fabric/registry.h"
#include "sanlib/socket/fork_holders.h"
#include "sanlib/socket/late_fork.h"
#include "sanlib/socket/rendezvous_owner.h"
#include "sanlib/socket/socket_ops.h"

namespace san {

SAN_FORK_PATH Runtime& Runtime::Get() {
  static Runtime* runtime = [] {
    auto* rt = new Runtime();
    created_.store(rt, std::memory_order_release);
    return rt;
  }();
  return *runtime;
}

Runtime::Runtime() : config_(Config::Get()), connections_(table_) {
  pid_.store(ThisPid());
  // The name as started: programs rewrite their argv for ps (PostgreSQL's backends read
  // "postgres: user db 127.0.0.1(5432) idle"), which would put spaces into the report's prog=.
  snprintf(prog_, sizeof prog_, "%s",
           *program_invocation_short_name ? program_invocation_short_name : "?");
  for (char* c = prog_; *c; ++c) {
    if (*c <= ' ' || *c == '=' || *c > '~') *c = '_';
  }
  if (config_.provider == ProviderChoice::kShm || config_.provider == ProviderChoice::kAuto) {
    shm_ = fabric::GetProvider("shm");
    if (!shm_) shm_unavailable_ = "shm provider unavailable";
  } else if (config_.provider == ProviderChoice::kVerbs) {
    shm_unavailable_ = "SAN_PROVIDER=verbs";
  } else {
    shm_unavailable_ = "SAN_PROVIDER=off";
  }
  if (!config_.report.empty()) OpenReport();
  pthread_atfork(
      [] {
        CheckMissedFork();         // a raw clone's child that forks: its locks are the parent's
        WatchForeignRendezvous();  // before the locks: it may open a rendezvous
        Runtime& rt = Get();
        BeginLateFork();
        const bool alone = OnlyThreadEver();
        if (fork_alone_ != alone) fork_alone_ = alone;  // as BeginLateFork: no write if unchanged
        if (fork_alone_) {
          rt.table_.ForEach([](SanSocket* s) {
            HoldAcrossFork(s);
            KeepAcrossFork(s, true);
          });
          return;
        }
        rt.connections_.QuiesceForFork();  // first: a step of its thread may take the others
        rt.table_.BeforeFork([](SanSocket* s) {
          HoldAcrossFork(s);
          KeepAcrossFork(s, false);
        });
        rt.connections_.BeforeFork();
        rt.closer_.BeforeFork();
      },
      [] {
        Runtime& rt = Get();
        AfterLateFork(false, fork_alone_);
        if (fork_alone_) return;
        rt.closer_.AfterForkParent();
        rt.connections_.AfterForkParent();
        rt.table_.AfterForkParent();
      },
      &Runtime::AfterForkChild);
  atexit(&Runtime::AtExit);
}

SAN_FORK_PATH void Runtime::AfterForkChild() {
  Runtime& rt = Get();
  rt.pid_.store(RefreshThisPid());
  rt.usage_.Reset();  // this process's own from now on (usage())
  if (fork_alone_) {
    rt.connections_.AfterForkChildAlone();  // no thread of ours ever ran, no lock was taken
  } else {
    rt.closer_.AfterForkChild();
    rt.connections_.AfterForkChild();
    rt.table_.AfterForkChild();
  }
  NoteForkChild();
  AfterLateFork(true, fork_alone_);
}

SAN_FORK_PATH void Runtime::AtQuickExit() {
  Runtime* rt = IfCreated();
  if (!rt || rt->pid() != KernelPid()) return;
  rt->WriteReport();
}

void Runtime::CheckMissedFork() {
  Runtime* rt = IfCreated();
  if (rt && rt->pid() != ThisPid()) rt->AdoptMissedFork();  // no syscall (common/this_pid.h)
}

bool Runtime::InVforkChild() {
  Runtime* rt = IfCreated();
  if (!rt) return false;
  const pid_t self = KernelPid();
  if (self == rt->pid()) return false;
  // Another process. A vfork child shares our memory, the cached pid's page with it; a raw
  // clone's child does not (ThisPid gives it its own pid). Where MADV_WIPEONFORK is refused the
  // cache is the kernel's answer in every process: the kernel tells (kcmp; refused: not one).
  if (ThisPid() == rt->pid()) return true;
  return Syscall(SYS_kcmp, self, rt->pid(), KCMP_VM, 0, 0) == 0;
}

void Runtime::AdoptMissedFork() {
  fork_alone_ = false;  // the locks are taken below, as the handlers would have
  BeginLateFork();      // the last fork's kept candidates were its child's, not this one's
  table_.LockAfterMissedFork();
  connections_.LockAfterMissedFork();
  closer_.LockAfterMissedFork();
  AfterForkChild();
  // Its parent may still hold them (and cannot know it does): never handed on from a vfork child.
  table_.ForEach([](SanSocket* s) { s->fork_shared.store(true, std::memory_order_relaxed); });
  SAN_LOG_INFO("a child made without fork() (raw clone): sanlib's process state adopted");
}

void Runtime::AtExit() {
  // The kernel would send FIN for every socket still open: so do we, then give the FINs (and any
  // combined bytes) a bounded chance to be posted. Nothing posted is lost when we exit: it is in
  // the peer's buffers already.
  Runtime& rt = Get();
  const uint64_t start = NowNs();
  ShutdownAllForExit();  // waits (bounded by the linger) for their FINs to be posted
  const uint64_t spent_ms = (NowNs() - start) / 1000000;
  size_t left = rt.closer_.Drain(spent_ms >= rt.config_.linger_ms
                                     ? 0
                                     : rt.config_.linger_ms - static_cast<uint32_t>(spent_ms));
  if (left) SAN_LOG_WARN("exit: %zu connection(s) could not post their FIN in time", left);
  rt.WriteReport();
}

namespace {

// append, not "literal" + string: GCC 12's -Wrestrict false positive in optimised builds.
std::string ForcedVerbsBut(const std::string& why) {
  return std::string("SAN_PROVIDER=verbs, but ").append(why);
}

bool OnVerbs(const proto::Stream& stream) {
  return const_cast<proto::Stream&>(stream).endpoint().provider_kind() ==
         fabric::ProviderKind::kVerbs;
}

}  // namespace

void Runtime::CountSettled(const proto::Stream* stream) {
  if (!stream) {
    usage_.tcp_connections.fetch_add(1);
  } else if (OnVerbs(*stream)) {
    usage_.verbs_connections.fetch_add(1);
  } else {
    usage_.shm_connections.fetch_add(1);
  }
}

void Runtime::CountFinished(proto::Stream& stream) {
  const proto::StreamStats st = stream.Stats();
  const bool verbs = OnVerbs(stream);
  (verbs ? usage_.verbs_bytes_sent : usage_.shm_bytes_sent).fetch_add(st.bytes_sent);
  (verbs ? usage_.verbs_bytes_received : usage_.shm_bytes_received).fetch_add(st.bytes_received);
  if (verbs) usage_.verbs_zero_copy_bytes_sent.fetch_add(st.zero_copy_bytes_sent);
}

void Runtime::OpenReport() {
  const int fd = open(config_.report.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    SAN_LOG_WARN("SAN_REPORT %s: %s", config_.report.c_str(), strerror(errno));
    return;
  }
  report_fd_.reset(PlaceLow(fd));
  report_id_ = IdentityOf(report_fd_.get());
}

void Runtime::WriteReport() {
  if (config_.report.empty()) return;
  char line[512];
  // Signed: a line is this process's share of the totals, and a fork child that moves a
  // connection its parent counted as TCP has -1 there (and +1 on shm), so the lines add up.
  auto v = [](const std::atomic<uint64_t>& c) { return static_cast<long long>(c.load()); };
  const int n = snprintf(line, sizeof line,
                         "pid=%d prog=%s shm_connections=%lld tcp_connections=%lld "
                         "shm_bytes_sent=%lld shm_bytes_received=%lld verbs_connections=%lld "
                         "verbs_bytes_sent=%lld verbs_bytes_received=%lld "
                         "verbs_zero_copy_bytes_sent=%lld\n",
                         getpid(), prog_, v(usage_.shm_connections), v(usage_.tcp_connections),
                         v(usage_.shm_bytes_sent), v(usage_.shm_bytes_received),
                         v(usage_.verbs_connections), v(usage_.verbs_bytes_sent),
                         v(usage_.verbs_bytes_received), v(usage_.verbs_zero_copy_bytes_sent));
  // One write(2) with O_APPEND: lines of concurrent processes do not interleave.
  // The program may have closed our fd (a loop over every number) and reused the number: write
  // only to the file we opened.
  if (report_fd_.valid() && IdentityOf(report_fd_.get()) != report_id_) {
    (void)report_fd_.release();  // not ours any more
  }
  if (!report_fd_.valid()) OpenReport();  // not open at start, or lost: try again
  if (report_fd_.valid() && n > 0 &&
      kernel::write(report_fd_.get(), line, static_cast<size_t>(std::min(n, 511))) < 0) {
    SAN_LOG_WARN("SAN_REPORT %s: %s", config_.report.c_str(), strerror(errno));
  }
}

fabric::Provider* Runtime::Verbs(std::string* why_not) {
  if (config_.provider != ProviderChoice::kAuto && config_.provider != ProviderChoice::kVerbs) {
    *why_not = config_.provider == ProviderChoice::kOff ? "SAN_PROVIDER=off" : "SAN_PROVIDER=shm";
    return nullptr;
  }
  // The registry opens it once per process (and remembers why not); nothing before this call.
  if (fabric::Provider* verbs = fabric::GetProvider("verbs")) return verbs;
  const char* why = fabric::WhyUnavailable("verbs");
  *why_not = why ? why : "verbs: unavailable";
  if (config_.provider == ProviderChoice::kVerbs && !verbs_error_logged_.exchange(true)) {
    // Asked for explicitly and impossible: say so once, loudly; every socket still works (TCP).
    SAN_LOG_ERROR("SAN_PROVIDER=verbs, but %s: SAN sockets use kernel TCP", why_not->c_str());
  }
  return nullptr;
}

bool Runtime::SanEnabled(std::string* why_not) {
  if (config_.provider == ProviderChoice::kOff) {
    *why_not = "SAN_PROVIDER=off";
    return false;
  }
  if (shm_) return true;
  std::string why_verbs;
  if (Verbs(&why_verbs)) return true;
  *why_not =
      config_.provider == ProviderChoice::kVerbs ? ForcedVerbsBut(why_verbs) : shm_unavailable_;
  return false;
}

fabric::Provider* Runtime::ShmProviderFor(const sockaddr* peer, socklen_t len,
                                          std::string* why_not) {
  if (!shm_) {
    *why_not = shm_unavailable_;
    return nullptr;
  }
  if (!shm_->Reaches(peer, len)) {
    *why_not = "peer is not on this host";
    return nullptr;
  }
  return shm_;
}

fabric::Provider* Runtime::ProviderFor(const sockaddr* peer, socklen_t len, std::string* why_not) {
  switch (config_.provider) {
    case ProviderChoice::kOff:
      *why_not = "SAN_PROVIDER=off";
      return nullptr;
    case ProviderChoice::kShm:
      if (fabric::Provider* p = ShmProviderFor(peer, len, why_not)) return p;
      if (shm_) *why_not = "SAN_PROVIDER=shm: peer is not on this host";
      return nullptr;
    case ProviderChoice::kVerbs: {
      std::string why;
      fabric::Provider* verbs = Verbs(&why);
      if (!verbs) {
        *why_not = ForcedVerbsBut(why);
        return nullptr;
      }
      if (!verbs->Reaches(peer, len)) {
        *why_not = "SAN_PROVIDER=verbs, but no RDMA device routes to the peer";
        return nullptr;
      }
      return verbs;
    }
    case ProviderChoice::kAuto:
      break;
  }
  // auto: shm for this host (as cheap as it was before verbs existed: no verbs call at all).
  if (shm_ && shm_->Reaches(peer, len)) return shm_;
  std::string why;
  fabric::Provider* verbs = Verbs(&why);
  if (verbs && verbs->Reaches(peer, len)) return verbs;
  // Keep "peer is not on this host" first: tools and tests match on it.
  *why_not = "peer is not on this host (no provider reaches it; ";
  if (verbs) {
    why_not->append("verbs: no RDMA device routes to it)");
  } else {
    why_not->append(why).append(")");
  }
  return nullptr;
}

std::vector<fabric::Provider*> Runtime::ListenProviders(const sockaddr* addr, socklen_t len,
                                                        std::string* why_not) {
  std::vector<fabric::Provider*> out;
  if (!SanEnabled(why_not)) return out;
  if (shm_) out.push_back(shm_);
  // verbs only where a remote client could come from: not for a loopback-bound listener.
  std::string why_verbs = "verbs: listener bound to a loopback address";
  if (!fabric::IsLoopbackAddress(addr, len)) {
    if (fabric::Provider* verbs = Verbs(&why_verbs)) out.push_back(verbs);
  }
  if (out.empty()) *why_not = ForcedVerbsBut(why_verbs);
  return out;
}

fabric::Provider* Runtime::ListenProvider(std::string* why_not) {
  if (!shm_) *why_not = shm_unavailable_;
  return shm_;
}

proto::StreamParams Runtime::StreamParamsFor(const fabric::Provider& provider) const {
  proto::StreamParams p;
  p.window = config_.window;
  p.ack_threshold = config_.ack_threshold;
  p.mtu = std::min(config_.mtu, provider.max_mtu());
  p.combine.enabled = config_.combine;
  p.combine.copy_threshold = config_.copy_threshold;
  p.combine.mtu = p.mtu;
  p.combine_timer_us = config_.combine_timer_us;
  p.zero_copy_min =
      (provider.capabilities() & fabric::kCapRegisteredSend) ? config_.zero_copy_min : 0;
  return p;
}

}  // namespace san
