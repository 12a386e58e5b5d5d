// RealCalls: the libc functions the compatibility layer stands in front of, resolved once.
//
// Every interposed call that is not for a SAN socket goes straight to the function found here
// (dlsym(RTLD_NEXT): the next definition after ours, normally libc's), so other fds see no change
// in behaviour. The table is filled on first use, thread-safely, and never changes afterwards.
// sanlib's own kernel calls do not come through here: they are raw system calls (common/kernel.h).
#pragma once

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace san::compat {

struct RealCalls {
  int (*socket)(int, int, int);
  int (*listen)(int, int);
  int (*accept)(int, sockaddr*, socklen_t*);
  int (*accept4)(int, sockaddr*, socklen_t*, int);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*shutdown)(int, int);
  int (*close)(int);
  int (*getsockopt)(int, int, int, void*, socklen_t*);
  int (*setsockopt)(int, int, int, const void*, socklen_t);

  ssize_t (*read)(int, void*, size_t);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*readv)(int, const iovec*, int);
  ssize_t (*writev)(int, const iovec*, int);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
  ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  ssize_t (*recvmsg)(int, msghdr*, int);
  int (*sendmmsg)(int, mmsghdr*, unsigned int, int);
  int (*recvmmsg)(int, mmsghdr*, unsigned int, int, timespec*);
  ssize_t (*sendfile)(int, int, off_t*, size_t);
  ssize_t (*read_chk)(int, void*, size_t, size_t);
  ssize_t (*recv_chk)(int, void*, size_t, size_t, int);
  ssize_t (*recvfrom_chk)(int, void*, size_t, size_t, int, sockaddr*, socklen_t*);

  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  // May be null (glibc before 2.34): then close_range/closefrom are not interposed in effect.
  int (*close_range)(unsigned int, unsigned int, int);
  int (*fcntl)(int, int, ...);
  int (*fcntl64)(int, int, ...);  // may be null (older libc)
  int (*ioctl)(int, unsigned long, ...);

  int (*poll)(pollfd*, nfds_t, int);
  int (*ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
  int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
  int (*pselect)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
  // The blocking epoll waits (cancellation points), for an epoll_wait with only kernel fds.
  int (*epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
  // May be null (glibc before 2.35): then the system call is made directly.
  int (*epoll_pwait2)(int, epoll_event*, int, const timespec*, const sigset_t*);

  FILE* (*fdopen)(int, const char*);

  int (*execve)(const char*, char* const[], char* const[]);
  int (*execvpe)(const char*, char* const[], char* const[]);
  int (*fexecve)(int, char* const[], char* const[]);

  // Children that glibc starts and execs by itself (compat/interpose_spawn.cc), and the file
  // actions it keeps for posix_spawn. The _np ones may be null (glibc before 2.29, 2.34, 2.35).
  int (*posix_spawn)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                     const posix_spawnattr_t*, char* const[], char* const[]);
  int (*posix_spawnp)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                      const posix_spawnattr_t*, char* const[], char* const[]);
  int (*system)(const char*);
  FILE* (*popen)(const char*, const char*);
  int (*spawn_actions_init)(posix_spawn_file_actions_t*);
  int (*spawn_actions_destroy)(posix_spawn_file_actions_t*);
  int (*spawn_actions_addclose)(posix_spawn_file_actions_t*, int);
  int (*spawn_actions_adddup2)(posix_spawn_file_actions_t*, int, int);
  int (*spawn_actions_addopen)(posix_spawn_file_actions_t*, int, const char*, int, mode_t);
  int (*spawn_actions_addclosefrom_np)(posix_spawn_file_actions_t*, int);
  int (*spawn_actions_addchdir_np)(posix_spawn_file_actions_t*, const char*);
  int (*spawn_actions_addfchdir_np)(posix_spawn_file_actions_t*, int);
  int (*spawn_actions_addtcsetpgrp_np)(posix_spawn_file_actions_t*, int);
};

// The table (resolved on first call; aborts with a message if libc lacks a required function).
const RealCalls& Real();

}  // namespace san::compat
