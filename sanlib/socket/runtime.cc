#include "socket/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/registry.h"
#include "socket/socket_ops.h"

namespace san {

Runtime& Runtime::Get() {
  static Runtime* runtime = [] {
    auto* rt = new Runtime();
    created_.store(rt, std::memory_order_release);
    return rt;
  }();
  return *runtime;
}

Runtime::Runtime() : config_(Config::Get()), connections_(table_) {
  pid_.store(getpid());
  if (config_.provider == ProviderChoice::kShm || config_.provider == ProviderChoice::kAuto) {
    shm_ = fabric::GetProvider("shm");
    if (!shm_) shm_unavailable_ = "shm provider unavailable";
  } else if (config_.provider == ProviderChoice::kVerbs) {
    shm_unavailable_ = "SAN_PROVIDER=verbs: verbs provider not built";
    SAN_LOG_ERROR("%s", shm_unavailable_.c_str());
  }
  pthread_atfork(
      [] {
        Runtime& rt = Get();
        rt.table_.BeforeFork();
        rt.connections_.BeforeFork();
        rt.closer_.BeforeFork();
      },
      [] {
        Runtime& rt = Get();
        rt.closer_.AfterForkParent();
        rt.connections_.AfterForkParent();
        rt.table_.AfterForkParent();
      },
      [] {
        Runtime& rt = Get();
        rt.pid_.store(getpid());
        rt.closer_.AfterForkChild();
        rt.connections_.AfterForkChild();
        rt.table_.AfterForkChild();
        NoteForkChild();
      });
  atexit(&Runtime::AtExit);
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

void Runtime::CountFinished(proto::Stream& stream) {
  const proto::StreamStats st = stream.Stats();
  usage_.shm_bytes_sent.fetch_add(st.bytes_sent);
  usage_.shm_bytes_received.fetch_add(st.bytes_received);
}

void Runtime::WriteReport() {
  if (config_.report.empty()) return;
  char line[512];
  const int n = snprintf(line, sizeof line,
                         "pid=%d prog=%s shm_connections=%llu tcp_connections=%llu "
                         "shm_bytes_sent=%llu shm_bytes_received=%llu\n",
                         getpid(), program_invocation_short_name,
                         static_cast<unsigned long long>(usage_.shm_connections.load()),
                         static_cast<unsigned long long>(usage_.tcp_connections.load()),
                         static_cast<unsigned long long>(usage_.shm_bytes_sent.load()),
                         static_cast<unsigned long long>(usage_.shm_bytes_received.load()));
  // One write(2) with O_APPEND: lines of concurrent processes do not interleave.
  UniqueFd fd(open(config_.report.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd.valid() && n > 0) {
    if (::syscall(SYS_write, fd.get(), line, static_cast<size_t>(std::min(n, 511))) < 0) {
      SAN_LOG_WARN("SAN_REPORT %s: %s", config_.report.c_str(), strerror(errno));
    }
  }
}

fabric::Provider* Runtime::ProviderFor(const sockaddr* peer, socklen_t len, std::string* why_not) {
  if (config_.provider == ProviderChoice::kOff) {
    *why_not = "SAN_PROVIDER=off";
    return nullptr;
  }
  if (!shm_) {
    *why_not = shm_unavailable_;
    return nullptr;
  }
  if (!shm_->Reaches(peer, len)) {
    *why_not = "peer is not on this host (no provider reaches it)";
    return nullptr;
  }
  return shm_;
}

fabric::Provider* Runtime::ListenProvider(std::string* why_not) {
  if (config_.provider == ProviderChoice::kOff) {
    *why_not = "SAN_PROVIDER=off";
    return nullptr;
  }
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
  return p;
}

}  // namespace san
