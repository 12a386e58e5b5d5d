// Test support for suites that need the real rpcbind: a process-wide lock (suites of different
// build trees and ctest -j runs share one rpcbind and fixed program numbers), and rpcbind itself,
// started in the foreground (support/program.h) when none is running and stopped again when the
// suite ends. Test-only (link san_test_process); call from the suite's
// SetUpTestSuite/TearDownTestSuite.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/program.h"

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
    // Its output to /dev/null: a test runner reading our stdout must not wait for rpcbind too.
    ProgramSpec spec;
    spec.argv = {access("/usr/sbin/rpcbind", X_OK) == 0 ? "/usr/sbin/rpcbind" : "/sbin/rpcbind",
                 "-f"};
    spec.stdout_path = spec.stderr_path = "/dev/null";
    spec.stop_signal = SIGTERM;  // at the end of the suite, waited for without limit
    spec.stop_timeout_ms = -1;
    rpcbind_.Start(spec);
    for (int i = 0; i < 200 && !RpcbindReachable(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~RpcbindSession() {
    rpcbind_.Shutdown();
    if (lock_fd_ >= 0) close(lock_fd_);
  }
  RpcbindSession(const RpcbindSession&) = delete;
  RpcbindSession& operator=(const RpcbindSession&) = delete;

  bool ok() const { return RpcbindReachable(); }

 private:
  int lock_fd_ = -1;
  Program rpcbind_;  // not started when one was running already
};

}  // namespace san::testing_support
