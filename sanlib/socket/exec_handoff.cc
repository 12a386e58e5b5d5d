#include "sanlib/socket/exec_handoff.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "sanlib/common/clock.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/open_fds.h"
#include "sanlib/common/raw_syscall.h"
#include "sanlib/socket/exec_image.h"
#include "sanlib/socket/fork_holders.h"
#include "sanlib/socket/late_fork.h"
#include "sanlib/socket/late_upgrade.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"
#include "sanlib/socket/tcp_move.h"

namespace san {
namespace {

constexpr size_t kMaxInheritBytes = 64u << 20;

int Dup3(int from, int to) { return static_cast<int>(Syscall(SYS_dup3, from, to, 0)); }

// A TCP socket whose connection was reset: its first read reports ECONNRESET (then EOF), writes
// EPIPE. What a program gets instead of a SAN connection it cannot use: an error it sees, never a
// kernel connection whose peer reads elsewhere. Made over loopback (listen, connect, accept, close
// with a zero linger); if that fails, an unconnected TCP socket (ENOTCONN / EPIPE) still errs.
UniqueFd MakeResetSocket() {
  UniqueFd c(kernel::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  UniqueFd l(kernel::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!c.valid() || !l.valid()) return c;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (kernel::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      kernel::listen(l.get(), 1) != 0 ||
      kernel::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      kernel::connect(c.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return c;
  }
  UniqueFd accepted(kernel::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!accepted.valid()) return c;
  const linger reset{1, 0};
  kernel::setsockopt(accepted.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  accepted.reset();  // RST
  pollfd p{c.get(), POLLIN, 0};
  kernel::poll(&p, 1, 200);  // loopback delivers it at once; the bound only guards oddities
  return c;
}

// Puts a reset socket at `number` (for good: the new image's side of an import that failed).
void ResetNumber(int number) {
  UniqueFd placeholder = MakeResetSocket();
  if (!placeholder.valid() || Dup3(placeholder.get(), number) < 0) {
    SAN_LOG_ERROR("fd %d: cannot replace an unusable SAN connection: %s", number, strerror(errno));
  }
}

// The combine timer watches a stream with bytes waiting (as data_path.cc arms it).
void RearmTimer(proto::Stream& stream) {
  stream.DisarmTimer();
  if (stream.FlushIfDue(NowNs()) && stream.TryArmTimer()) {
    Runtime::Get().closer().ArmTimer(&stream);
  }
}

}  // namespace

std::unique_ptr<ExecHandoff> ExecHandoff::Prepare(bool new_image_runs_layer) {
  Runtime* rt = Runtime::IfCreated();
  if (!rt) return nullptr;
  std::unique_ptr<ExecHandoff> h(new ExecHandoff());
  h->vfork_child_ = Runtime::InVforkChild();
  if (h->vfork_child_) {
    h->HandOffInVforkChild(*rt);
    return h->swapped_.empty() ? nullptr : std::move(h);
  }
  // A raw clone's child that made no call of ours yet: its own copy of the state, adopted as a
  // fork child's (its connections count as shared: fork_shared) before anything is decided.
  Runtime::CheckMissedFork();
  h->pin_ = rt->table().Pin();
  // Every connected SAN socket, with those of its numbers the new image inherits (maybe none).
  struct Candidate {
    std::vector<int> inherited;
    bool peer_is_ours = false;  // both ends in this process (looked at before anything is swapped)
  };
  std::map<SanSocket*, Candidate> candidates;
  std::map<SanSocket*, bool> forked_late;  // late candidates a fork shared: inherited by the image?
  rt->table().ForEachNumber([&](int fd, SanSocket* s) {
    if (s->late && s->mode.load(std::memory_order_acquire) == SocketMode::kTcp) {
      forked_late[s] |= !kernel::CloseOnExec(fd);
    }
    if (s->mode.load(std::memory_order_acquire) != SocketMode::kShm || !s->stream) return;
    Candidate& c = candidates[s];
    if (!kernel::CloseOnExec(fd)) c.inherited.push_back(fd);
  });
  // One the new image does not inherit is held by this process no more (late_fork.h).
  for (const auto& [s, inherited] : forked_late) {
    if (!inherited) LetGoAtExec(*s);
  }
  if (candidates.empty()) return nullptr;
  if (!new_image_runs_layer) {
    for (auto& [s, c] : candidates) c.peer_is_ours = PeerIsOurs(rt->table(), *s);
  }
  const uint64_t stdio_deadline = NowNs() + uint64_t{kStdioHolderWaitMs} * 1000000;
  // Connections moving to their kernel socket (the new image does not load the layer), with the
  // numbers to reset if the move does not complete: MOVE goes to all of them first, then their
  // peers' answers are awaited together, within one kMoveWaitMs.
  std::vector<std::pair<SanSocket*, std::vector<int>>> to_tcp;
  const uint64_t move_deadline = NowNs() + uint64_t{kMoveWaitMs} * 1000000;
  for (auto& [s, c] : candidates) {
    std::sort(c.inherited.begin(), c.inherited.end());
    const bool on_stdio = !c.inherited.empty() && c.inherited.front() <= STDERR_FILENO;
    // Only a real process that alone holds the connection, with no other thread asleep on it,
    // may hand it on (to the new image's layer, or to the kernel socket).
    const bool may_hand_on = MayHandOn(*s);
    const bool may_move = new_image_runs_layer && may_hand_on;
    // To the kernel socket: not when the peer is one of our own sockets (this thread, in exec,
    // would have to answer its own MOVE), and a failed exec must find such a pair as it was.
    const bool may_go_tcp = !new_image_runs_layer && may_hand_on && !c.peer_is_ours;
    if (c.inherited.empty()) {
      // Closed by the exec. Only the last holder's close is the connection's end (FIN).
      if ((may_move || may_go_tcp) && h->CheckSole(*s, 0)) {
        if (may_move) {
          h->Move(*s, {}, true);
        } else if (StartMoveToTcp(*s, move_deadline).ok()) {
          // Moved to the kernel socket, the exec's close of it is a TCP close: FIN after all we
          // sent, or a reset when bytes we never read come back to us -- the kernel's rules. A
          // failed exec keeps it as a TCP connection.
          to_tcp.emplace_back(s, std::vector<int>{});
        }
      }
      continue;
    }
    const uint64_t now = NowNs();
    const int wait_ms =
        on_stdio && now < stdio_deadline ? static_cast<int>((stdio_deadline - now) / 1000000) : 0;
    bool moved = false;
    const char* why = !new_image_runs_layer ? "the new image does not load sanlib"
                                            : "another process holds it, or it is in use";
    if ((may_move || may_go_tcp) && h->CheckSole(*s, wait_ms)) {
      if (may_move) {
        moved = h->Move(*s, c.inherited, false);
      } else {
        // The new image will use the kernel socket itself: move the connection there.
        Status st = StartMoveToTcp(*s, move_deadline);
        if (st.ok()) {
          to_tcp.emplace_back(s, c.inherited);
          continue;
        }
        SAN_LOG_WARN("exec: fd %d: the SAN connection could not move to kernel TCP: %s",
                     c.inherited.front(), st.ToString().c_str());
      }
    }
    if (!moved) {
      SAN_LOG_INFO(
          "exec: fd %d's SAN connection cannot follow into the new image (%s); it gets "
          "a reset socket",
          c.inherited.front(), why);
      for (int n : c.inherited) h->Swap(n);
    }
  }
  for (auto& [s, numbers] : to_tcp) {
    Status st =
        FinishMoveToTcp(*s, s->fd.load(), move_deadline, "an exec into a program without sanlib");
    if (st.ok() || numbers.empty()) continue;
    // MOVE went but the move did not complete: the connection is lost (our side is failed; the
    // peer reads what it had, then ECONNRESET), and the new image gets reset sockets.
    SAN_LOG_WARN("exec: fd %d: the SAN connection could not move to kernel TCP: %s; it is reset",
                 numbers.front(), st.ToString().c_str());
    for (int n : numbers) h->Swap(n);
  }
  if (!h->moved_.empty()) {
    std::vector<exec::InheritedSocket> records;
    for (Moved& m : h->moved_) {
      exec::InheritedSocket r;
      r.numbers = m.close_on_arrival ? std::vector<int>{m.private_number.get()} : m.numbers;
      r.close_on_arrival = m.close_on_arrival;
      r.nonblocking = m.socket->nonblocking.load();
      r.read_shut = m.socket->read_shut.load();
      for (const UniqueFd& fd : m.image.endpoint.fds) r.endpoint_fds.push_back(fd.get());
      r.image.params = m.image.params;
      r.image.provider_caps = m.image.provider_caps;
      r.image.recv_region = m.image.recv_region;
      r.image.staging_region = m.image.staging_region;
      r.image.endpoint.state = m.image.endpoint.state;
      r.image.state = m.image.state;
      records.push_back(std::move(r));
    }
    if (!h->WriteMemfd(exec::EncodeInheritance(records))) {
      // Nothing can move after all: back to the placeholders (the exported copies are dropped).
      SAN_LOG_WARN("exec: cannot pass SAN connections to the new image: %s", strerror(errno));
      for (Moved& m : h->moved_) {
        RearmTimer(*m.socket->stream);
        for (int n : m.numbers) h->Swap(n);
      }
      h->moved_.clear();
    }
  }
  return h;
}

bool ExecHandoff::CheckSole(SanSocket& s, int wait_ms) {
  const uint64_t deadline = NowNs() + uint64_t(wait_ms) * 1000000;
  for (;;) {
    if (!OthersHold(s)) return true;
    if (NowNs() >= deadline) return false;
    kernel::poll(nullptr, 0, 2);  // an inetd-style parent closes its copy right after fork
  }
}

bool ExecHandoff::Move(SanSocket& s, std::vector<int> numbers, bool close_on_arrival) {
  Runtime& rt = Runtime::Get();
  proto::Stream& stream = *s.stream;
  // The close thread must not flush this stream after we copied it.
  rt.closer().Forget(&stream);
  stream.Flush();  // combined bytes out now if there is credit (else they travel in the image)
  Moved m{&s, std::move(numbers), close_on_arrival, UniqueFd(), {}};
  Status st = stream.Export(&m.image);
  if (st.ok()) {
    for (const UniqueFd& fd : m.image.endpoint.fds) {
      if (kernel::fcntl(fd.get(), F_SETFD, 0) != 0) st = Status::FromErrno("fcntl(exported fd)");
    }
  }
  if (st.ok() && close_on_arrival) {
    m.private_number.reset(DupHigh(s.fd.load()));
    if (!m.private_number.valid() || kernel::fcntl(m.private_number.get(), F_SETFD, 0) != 0) {
      st = Status::FromErrno("dup(kernel socket)");
    }
  }
  if (!st.ok() || m.image.endpoint.fds.size() > exec::kMaxEndpointFds ||
      m.numbers.size() > exec::kMaxNumbers) {
    SAN_LOG_WARN("exec: fd %d: cannot export the SAN connection: %s", s.fd.load(),
                 st.ok() ? "too many fds" : st.ToString().c_str());
    RearmTimer(stream);
    return false;
  }
  moved_.push_back(std::move(m));
  return true;
}

namespace {

// Why a vfork child cannot move the parent's connection `s` to TCP, or nullptr if it can. It runs
// the move on the parent's socket through its own fd table, which must still hold every fd the
// endpoint uses (the same files as the parent's: kcmp), and it cannot probe a fork-holder pipe
// (fork_holders.h: the probe would change the parent's fds) nor answer a MOVE the parent's other
// end of the connection would have to answer.
const char* WhyVforkChildCannotMove(Runtime& rt, SanSocket& s) {
  if (!MayHandOn(s)) return "another thread is asleep on it";
  if (s.fork_shared.load(std::memory_order_relaxed) || s.holders_lost) return "a fork shared it";
  fabric::Endpoint& endpoint = s.stream->endpoint();
  const int32_t peer = endpoint.peer_process();
  if (peer == 0 || peer == rt.pid()) return "its other end may be in this process";
  std::vector<int> fds;
  if (endpoint.provider_kind() != fabric::ProviderKind::kShm || !endpoint.ListFds(&fds)) {
    return "it is not on shm";
  }
  const pid_t self = getpid();
  for (int fd : fds) {
    if (Syscall(SYS_kcmp, self, rt.pid(), KCMP_FILE, fd, fd) != 0) {
      return "the child closed or replaced an fd sanlib moves it with";
    }
  }
  return nullptr;
}

}  // namespace

void ExecHandoff::HandOffInVforkChild(Runtime& rt) {
  // This child's inherited sockets first (few: what it put on 0-2 and kept), so that a child that
  // inherits none -- most -- looks at none of the parent's connections. The scan stops at our
  // region: a connection numbered up there is looked at by number below.
  const int high = HighFdBase();
  std::vector<int> open;
  if (!OpenFds(0, high > 0 ? static_cast<unsigned>(high) - 1 : ~0u, &open)) return;
  struct Inherited {
    int number;
    ino_t ino;
  };
  std::vector<Inherited> sockets;
  auto note_if_inherited = [&](int fd) {
    struct stat st {};
    if (!kernel::CloseOnExec(fd) && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
      sockets.push_back({fd, st.st_ino});
    }
  };
  for (int fd : open) note_if_inherited(fd);
  // Pinned while we look and move, released before the exec: the lock is the parent's.
  auto pin = rt.table().Pin();
  if (high > 0) {
    rt.table().ForEachNumber([&](int fd, SanSocket*) {
      if (fd >= high) note_if_inherited(fd);
    });
  }
  if (sockets.empty()) return;
  // Which of the parent's connections each one is: the kernel socket's inode where the sweep
  // learned it, else the same file as the parent's number (kcmp), else the inode read from the
  // parent's fd of that number (kcmp refused).
  std::map<SanSocket*, std::vector<int>> inherited;
  std::map<SanSocket*, std::vector<int>> late;  // candidates still on TCP (late_upgrade.h)
  const pid_t self = getpid();
  rt.table().ForEachNumber([&](int fd, SanSocket* s) {
    const SocketMode mode = s->mode.load(std::memory_order_acquire);
    const bool candidate = mode == SocketMode::kTcp && LatePending(*s);
    if (!candidate && (mode != SocketMode::kShm || !s->stream)) return;
    ino_t ino = s->kernel_ino.load();
    for (const Inherited& i : sockets) {
      bool same = ino != 0 && ino == i.ino;
      if (ino == 0) {
        const long order = Syscall(SYS_kcmp, self, rt.pid(), KCMP_FILE, i.number, fd);
        if (order < 0) {
          char path[64];
          struct stat st {};
          snprintf(path, sizeof path, "/proc/%d/fd/%d", rt.pid(), fd);
          if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode)) ino = st.st_ino;
          same = ino != 0 && ino == i.ino;
        } else {
          same = order == 0;
        }
      }
      if (!same) continue;
      std::vector<int>& numbers = candidate ? late[s] : inherited[s];
      if (std::find(numbers.begin(), numbers.end(), i.number) == numbers.end()) {
        numbers.push_back(i.number);
      }
    }
  });
  // A candidate the new image holds must not move to shm under it (the parent cannot count the
  // image among its holders): it stays TCP for good, as for a posix_spawn child.
  // One whose move is under way goes on moving under the parent: the child gets a reset socket.
  for (auto& [s, numbers] : late) {
    if (KeepLateOnTcp(*s, "a vfork child's exec inherited it")) continue;
    SAN_LOG_INFO("exec: fd %d's connection is moving to shm; it gets a reset socket (vfork child)",
                 numbers.front());
    for (int n : numbers) Swap(n);
  }
  // Each one moves to its kernel socket on both ends, which the new image and the parent then
  // share as they would a kernel TCP connection: MOVE to all first, then the answers together.
  const uint64_t deadline = NowNs() + uint64_t{kMoveWaitMs} * 1000000;
  std::vector<std::pair<SanSocket*, std::vector<int>>> to_tcp;
  for (auto& [s, numbers] : inherited) {
    const char* why = WhyVforkChildCannotMove(rt, *s);
    Status st = why ? Status::Ok() : StartMoveToTcp(*s, deadline);
    if (!why && st.ok()) {
      to_tcp.emplace_back(s, std::move(numbers));
      continue;
    }
    SAN_LOG_INFO(
        "exec: fd %d's SAN connection cannot follow into the new image (vfork child: %s); "
        "it gets a reset socket",
        numbers.front(), why ? why : st.ToString().c_str());
    for (int n : numbers) Swap(n);
  }
  for (auto& [s, numbers] : to_tcp) {
    Status st = FinishMoveToTcp(*s, numbers.front(), deadline, "a vfork child's exec inherited it");
    if (st.ok()) continue;
    // MOVE went but the move did not complete: the connection is lost, as in Prepare.
    SAN_LOG_WARN("exec: fd %d: the SAN connection could not move to kernel TCP: %s; it is reset",
                 numbers.front(), st.ToString().c_str());
    for (int n : numbers) Swap(n);
  }
}

void ExecHandoff::Swap(int number) {
  // The sweep must not learn the placeholder as the socket, should the exec fail and the socket
  // come back: learned now (IsGhost's first look). Not in a vfork child: the socket is its
  // parent's, and so is what it learned.
  if (SanSocket* s = vfork_child_ ? nullptr : Runtime::Get().table().Find(number)) {
    (void)IsGhost(number, *s);
  }
  UniqueFd saved(DupHigh(number));
  UniqueFd placeholder = MakeResetSocket();
  if (!saved.valid() || !placeholder.valid() || Dup3(placeholder.get(), number) < 0) {
    SAN_LOG_ERROR("exec: fd %d: cannot put a reset socket in place of the SAN connection: %s",
                  number, strerror(errno));
    return;
  }
  swapped_.push_back(Swapped{number, std::move(saved)});
}

bool ExecHandoff::WriteMemfd(const std::vector<std::byte>& bytes) {
  if (bytes.size() > kMaxInheritBytes) {
    errno = E2BIG;
    return false;
  }
  UniqueFd fd(memfd_create("sanlib-exec", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  kernel::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
  memfd_.reset(PlaceHigh(fd.release()));
  if (kernel::fcntl(memfd_.get(), F_SETFD, 0) != 0) return false;
  env_entry_ = exec::kInheritVariable;
  env_entry_.append("=").append(std::to_string(memfd_.get()));
  return true;
}

void ExecHandoff::Abandon() {
  for (Swapped& s : swapped_) {
    if (Dup3(s.saved.get(), s.number) < 0) {
      SAN_LOG_ERROR("exec failed and fd %d could not be restored: %s", s.number, strerror(errno));
    }
  }
  swapped_.clear();
  for (Moved& m : moved_) RearmTimer(*m.socket->stream);
  moved_.clear();  // closes the exported copies of the endpoint fds
  memfd_.reset();
  env_entry_.clear();
  if (pin_.owns_lock()) pin_.unlock();
}

ExecHandoff::~ExecHandoff() {
  // After Abandon, or never reached (the exec succeeded). A vfork child must not release what it
  // never took; the pin is only held by a real process.
  if (pin_.owns_lock()) pin_.unlock();
}

void AdoptInherited(const char* value) {
  char* end = nullptr;
  const long number = strtol(value, &end, 10);
  unsetenv(exec::kInheritVariable);  // our children must not see it
  if (!end || *end != '\0' || number < 0 || number > INT32_MAX) {
    SAN_LOG_ERROR("%s=%s: not an fd number; inherited SAN connections are lost",
                  exec::kInheritVariable, value);
    return;
  }
  // Only a sealed memfd is what an exec of ours left (WriteMemfd); any other fd the variable names
  // belongs to the program and is left alone.
  constexpr int kOurSeals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
  const int fd = static_cast<int>(number);
  const int seals = kernel::fcntl(fd, F_GET_SEALS, 0);
  struct stat st;
  if (seals < 0 || (seals & kOurSeals) != kOurSeals || fstat(fd, &st) != 0 ||
      !S_ISREG(st.st_mode) || st.st_size < 0 ||
      static_cast<uint64_t>(st.st_size) > kMaxInheritBytes) {
    SAN_LOG_ERROR("%s: fd %d is not an inheritance record sanlib left; ignored",
                  exec::kInheritVariable, fd);
    return;
  }
  UniqueFd memfd(fd);
  std::vector<std::byte> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pread(memfd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  memfd.reset();
  Result<std::vector<exec::InheritedSocket>> records = exec::DecodeInheritance(bytes);
  if (done != bytes.size() || !records.ok()) {
    SAN_LOG_ERROR("%s: unreadable inheritance record (%s)", exec::kInheritVariable,
                  records.ok() ? "short read" : records.status().ToString().c_str());
    return;
  }
  Runtime& rt = Runtime::Get();
  for (exec::InheritedSocket& r : records.value()) {
    // Every number must be open, and the socket's a stream socket, before any of it is ours.
    bool present = true;
    for (int fd : r.numbers) present = present && kernel::fcntl(fd, F_GETFD, 0) >= 0;
    for (int fd : r.endpoint_fds) present = present && kernel::fcntl(fd, F_GETFD, 0) >= 0;
    int type = 0;
    socklen_t tlen = sizeof type;
    if (!present || kernel::getsockopt(r.numbers[0], SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 ||
        type != SOCK_STREAM) {
      SAN_LOG_ERROR("%s: inherited fds missing; that connection is lost", exec::kInheritVariable);
      continue;
    }
    for (int fd : r.endpoint_fds) {
      kernel::fcntl(fd, F_SETFD, FD_CLOEXEC);
      r.image.endpoint.fds.emplace_back(fd);
    }
    std::string why;
    fabric::Provider* provider = rt.ListenProvider(&why);
    Result<std::unique_ptr<proto::Stream>> stream =
        provider ? proto::Stream::Import(*provider, std::move(r.image))
                 : Result<std::unique_ptr<proto::Stream>>(Status(ENOTSUP, "no shm provider here"));
    SanSocket* s = stream.ok() ? Track(r.numbers[0], r.nonblocking) : nullptr;
    if (!s) {
      SAN_LOG_WARN("exec: fd %d: inherited SAN connection not re-attached (%s); reset",
                   r.numbers[0], stream.ok() ? "socket table" : stream.status().ToString().c_str());
      if (stream.ok()) stream.value()->Abort();
      for (int n : r.numbers) {
        if (r.close_on_arrival) {
          KernelClose(n);
        } else {
          ResetNumber(n);
        }
      }
      continue;
    }
    for (size_t i = 1; i < r.numbers.size(); ++i) NoteDuplicate(r.numbers[0], r.numbers[i]);
    if (r.read_shut) s->read_shut.store(true);
    proto::Stream& raw = *stream.value();
    raw.Flush();
    Settle(*s, std::move(stream).value(), std::string());
    RearmTimer(raw);
    SAN_LOG_INFO("exec: fd %d: SAN connection re-attached%s", r.numbers[0],
                 r.close_on_arrival ? " (to close it)" : "");
    if (r.close_on_arrival) Close(r.numbers[0]);
  }
}

}  // namespace san
