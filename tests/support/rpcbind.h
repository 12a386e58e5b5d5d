// Test support for suites that need the real rpcbind: a process-wide lock (suites of different
// build trees and ctest -j runs share one rpcbind and fixed program numbers), and rpcbind itself,
// started in the foreground when none is running and stopped again when the suite ends.
// Test-only; call from the suite's SetUpTestSuite/TearDownTestSuite.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace san::testing_support {

// rpcbind answers on 127.0.0.1:111 (TCP).
inline bool RpcbindReachable() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(111);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

class RpcbindSession {
 public:
  // Takes the lock, then makes sure rpcbind runs. ok() says whether it does.
  RpcbindSession() {
    lock_fd_ = open("/tmp/sanlib_rpcbind_tests.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ >= 0) flock(lock_fd_, LOCK_EX);
    if (RpcbindReachable()) return;
    const char* path =
        access("/usr/sbin/rpcbind", X_OK) == 0 ? "/usr/sbin/rpcbind" : "/sbin/rpcbind";
    char* const argv[] = {const_cast<char*>(path), const_cast<char*>("-f"), nullptr};
    // Its output to /dev/null: a test runner reading our stdout must not wait for rpcbind too.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid_, path, &actions, nullptr, argv, environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    for (int i = 0; i < 200 && !RpcbindReachable(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~RpcbindSession() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status;
      waitpid(pid_, &status, 0);
    }
    if (lock_fd_ >= 0) close(lock_fd_);
  }
  RpcbindSession(const RpcbindSession&) = delete;
  RpcbindSession& operator=(const RpcbindSession&) = delete;

  bool ok() const { return RpcbindReachable(); }

 private:
  int lock_fd_ = -1;
  pid_t pid_ = -1;
};

}  // namespace san::testing_support
