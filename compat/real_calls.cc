#include "compat/real_calls.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "sanlib/common/raw_syscall.h"

namespace san::compat {
namespace {

// Not through stdio or the log: they may call back into what is being resolved.
[[noreturn]] void Missing(const char* name) {
  const char prefix[] = "sanlib: libc has no ";
  san::Syscall(SYS_write, 2, prefix, sizeof prefix - 1);
  san::Syscall(SYS_write, 2, name, strlen(name));
  san::Syscall(SYS_write, 2, "\n", 1);
  abort();
}

template <typename F>
void Resolve(F*& slot, const char* name, bool required = true) {
  slot = reinterpret_cast<F*>(dlsym(RTLD_NEXT, name));
  if (!slot && required) Missing(name);
}

RealCalls Load() {
  RealCalls r{};
  Resolve(r.socket, "socket");
  Resolve(r.listen, "listen");
  Resolve(r.accept, "accept");
  Resolve(r.accept4, "accept4");
  Resolve(r.connect, "connect");
  Resolve(r.shutdown, "shutdown");
  Resolve(r.close, "close");
  Resolve(r.getsockopt, "getsockopt");
  Resolve(r.setsockopt, "setsockopt");
  Resolve(r.read, "read");
  Resolve(r.write, "write");
  Resolve(r.readv, "readv");
  Resolve(r.writev, "writev");
  Resolve(r.send, "send");
  Resolve(r.recv, "recv");
  Resolve(r.sendto, "sendto");
  Resolve(r.recvfrom, "recvfrom");
  Resolve(r.sendmsg, "sendmsg");
  Resolve(r.recvmsg, "recvmsg");
  Resolve(r.sendmmsg, "sendmmsg");
  Resolve(r.recvmmsg, "recvmmsg");
  Resolve(r.sendfile, "sendfile");
  Resolve(r.read_chk, "__read_chk");
  Resolve(r.recv_chk, "__recv_chk");
  Resolve(r.recvfrom_chk, "__recvfrom_chk");
  Resolve(r.dup, "dup");
  Resolve(r.dup2, "dup2");
  Resolve(r.dup3, "dup3");
  Resolve(r.close_range, "close_range", false);
  Resolve(r.fcntl, "fcntl");
  Resolve(r.fcntl64, "fcntl64", false);
  Resolve(r.ioctl, "ioctl");
  Resolve(r.poll, "poll");
  Resolve(r.ppoll, "ppoll");
  Resolve(r.select, "select");
  Resolve(r.pselect, "pselect");
  Resolve(r.epoll_pwait, "epoll_pwait");
  Resolve(r.epoll_pwait2, "epoll_pwait2", false);
  Resolve(r.fdopen, "fdopen");
  Resolve(r.execve, "execve");
  Resolve(r.execvpe, "execvpe");
  Resolve(r.fexecve, "fexecve");
  Resolve(r.posix_spawn, "posix_spawn");
  Resolve(r.posix_spawnp, "posix_spawnp");
  Resolve(r.system, "system");
  Resolve(r.popen, "popen");
  Resolve(r.spawn_actions_init, "posix_spawn_file_actions_init");
  Resolve(r.spawn_actions_destroy, "posix_spawn_file_actions_destroy");
  Resolve(r.spawn_actions_addclose, "posix_spawn_file_actions_addclose");
  Resolve(r.spawn_actions_adddup2, "posix_spawn_file_actions_adddup2");
  Resolve(r.spawn_actions_addopen, "posix_spawn_file_actions_addopen");
  Resolve(r.spawn_actions_addclosefrom_np, "posix_spawn_file_actions_addclosefrom_np", false);
  Resolve(r.spawn_actions_addchdir_np, "posix_spawn_file_actions_addchdir_np", false);
  Resolve(r.spawn_actions_addfchdir_np, "posix_spawn_file_actions_addfchdir_np", false);
  Resolve(r.spawn_actions_addtcsetpgrp_np, "posix_spawn_file_actions_addtcsetpgrp_np", false);
  return r;
}

}  // namespace

const RealCalls& Real() {
  static const RealCalls table = Load();
  return table;
}

namespace {

// Resolved when the library is loaded, before the program's threads exist: a fork while another
// thread was inside the first Real() (the connection thread's first poll, say) left the child's
// copy of the static's guard "being initialised" for good, and every interposed call of the
// child waited on it forever.
__attribute__((constructor)) void ResolveAtLoad() { (void)Real(); }

}  // namespace

}  // namespace san::compat
