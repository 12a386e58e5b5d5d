// A connection handed to a child that glibc starts and execs by itself (compat/interpose_spawn.cc):
// posix_spawn and posix_spawnp with the connection dup2'd onto the child's stdin and stdout,
// system() and popen() with it inherited (not close-on-exec) and redirected by the shell. The
// child is cat: it echoes what the client C sends until C shuts its side, then exits; this process
// closes its copy once the child is done. C must read back every byte and then EOF -- on a SAN
// connection exactly as on a kernel one (the oracle). Before, cat read a kernel socket the SAN
// peer never wrote to, and C read nothing. Also: the replay of file actions (HeldAfter), and a
// connection the child does not hold stays on shm. Linked with the link-in compatibility layer.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "compat/pair.h"
#include "compat/spawn_actions.h"

namespace san::testing_support {
namespace {

using compat::HeldAfter;
using compat::SpawnAction;

TEST(SpawnActions, InheritedUnlessCloseOnExecOrClosed) {
  const std::vector<PassableFd> parent = {{3, false}, {4, true}, {5, false}, {9, false}};
  EXPECT_EQ(HeldAfter(parent, {}), (std::vector<int>{3, 5, 9}));
  EXPECT_EQ(HeldAfter(parent, {{SpawnAction::kClose, 3}, {SpawnAction::kOpen, 5}}),
            (std::vector<int>{9}));
  EXPECT_EQ(HeldAfter(parent, {{SpawnAction::kCloseFrom, 5}}), (std::vector<int>{3}));
  EXPECT_EQ(HeldAfter(parent, {{SpawnAction::kOther}}), (std::vector<int>{3, 5, 9}));
}

TEST(SpawnActions, Dup2HandsOverEvenACloseOnExecConnection) {
  const std::vector<PassableFd> parent = {{4, true}, {6, true}};
  EXPECT_EQ(HeldAfter(parent, {}), std::vector<int>{});
  // onto stdin and stdout: held once, by its parent number
  EXPECT_EQ(HeldAfter(parent, {{SpawnAction::kDup2, 4, 0}, {SpawnAction::kDup2, 4, 1}}),
            std::vector<int>{4});
  // onto itself: glibc clears close-on-exec
  EXPECT_EQ(HeldAfter(parent, {{SpawnAction::kDup2, 6, 6}}), std::vector<int>{6});
  // a chain: 4 -> 7 -> 0, then 7 closed
  EXPECT_EQ(
      HeldAfter(parent,
                {{SpawnAction::kDup2, 4, 7}, {SpawnAction::kDup2, 7, 0}, {SpawnAction::kClose, 7}}),
      std::vector<int>{4});
  // the copy replaced again by another file (a pipe, fd 20, not a connection)
  EXPECT_EQ(HeldAfter(parent, {{SpawnAction::kDup2, 4, 1}, {SpawnAction::kDup2, 20, 1}}),
            std::vector<int>{});
}

TEST(SpawnActions, Dup2OfAnotherFileOntoAConnectionNumberReplacesIt) {
  const std::vector<PassableFd> parent = {{0, false}, {1, false}};
  EXPECT_EQ(HeldAfter(parent, {{SpawnAction::kDup2, 30, 1}}), std::vector<int>{0});
}

constexpr size_t kBytes = 64 * 1024;

uint8_t Byte(size_t i) { return static_cast<uint8_t>(i * 13 + (i >> 9)); }

// C: connects to the port from `port_fd`, sends kBytes, shuts its side, reads them back, then EOF.
[[noreturn]] void Client(int port_fd, bool san) {
  alarm(10);
  const int fd = ConnectToPortFrom(port_fd, san);
  if (fd < 0) _exit(21);
  std::vector<uint8_t> buf(kBytes + 1);
  for (size_t i = 0; i < kBytes; ++i) buf[i] = Byte(i);
  if (!WriteAll(fd, buf.data(), kBytes)) _exit(22);
  if (shutdown(fd, SHUT_WR) != 0) _exit(23);
  const ssize_t got = ReadToEof(fd, &buf);
  if (got < 0) _exit(24);
  if (got != static_cast<ssize_t>(kBytes)) _exit(got == 0 ? 26 : 27);
  for (size_t i = 0; i < kBytes; ++i) {
    if (buf[i] != Byte(i)) _exit(28);
  }
  close(fd);
  _exit(0);
}

enum class Spawn { kPosixSpawn, kPosixSpawnp, kSystem, kPopen, kPopenCloseOnExec };

// Starts cat on `conn` the `how` way and waits for it; 0 when cat exited 0.
int RunCat(Spawn how, int conn) {
  const std::string shell = "exec cat <&" + std::to_string(conn) + " >&" + std::to_string(conn);
  switch (how) {
    case Spawn::kPosixSpawn:
    case Spawn::kPosixSpawnp: {
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_adddup2(&actions, conn, 0);
      posix_spawn_file_actions_adddup2(&actions, conn, 1);
      char* const argv[] = {const_cast<char*>("cat"), nullptr};
      pid_t pid = -1;
      const int rc = how == Spawn::kPosixSpawn
                         ? posix_spawn(&pid, "/bin/cat", &actions, nullptr, argv, environ)
                         : posix_spawnp(&pid, "cat", &actions, nullptr, argv, environ);
      posix_spawn_file_actions_destroy(&actions);
      if (rc != 0) return -1;
      int status = 0;
      if (waitpid(pid, &status, 0) != pid) return -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    }
    case Spawn::kSystem: {
      const int status = system(shell.c_str());
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    }
    case Spawn::kPopen:
    case Spawn::kPopenCloseOnExec: {
      FILE* f = popen(shell.c_str(), how == Spawn::kPopen ? "r" : "er");
      if (!f) return -1;
      const int status = pclose(f);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    }
  }
  return -1;
}

// How the call names itself in the connection's reason (fd_passing.h).
const char* Via(Spawn how) {
  switch (how) {
    case Spawn::kPosixSpawn:
      return "posix_spawn";
    case Spawn::kPosixSpawnp:
      return "posix_spawnp";
    case Spawn::kSystem:
      return "system";
    case Spawn::kPopen:
    case Spawn::kPopenCloseOnExec:
      return "popen";
  }
  return "?";
}

class SpawnedChild : public ::testing::TestWithParam<std::tuple<bool, Spawn>> {};

TEST_P(SpawnedChild, ServesTheConnectionItWasGivenWithNothingLost) {
  const auto [san, how] = GetParam();
  int port_pipe[2];
  ASSERT_EQ(pipe2(port_pipe, O_CLOEXEC), 0);
  // The client before this process uses sanlib: it starts with nothing of ours.
  const pid_t client = fork();
  if (client == 0) Client(port_pipe[0], san);
  close(port_pipe[0]);

  const int listener = LoopbackListener(san);
  const uint16_t port = PortOf(listener);
  ASSERT_EQ(write(port_pipe[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  // posix_spawn hands the connection over by dup2 (so it may be close-on-exec here); system and
  // popen's shell inherits it.
  const bool by_dup2 = how == Spawn::kPosixSpawn || how == Spawn::kPosixSpawnp;
  pollfd p{listener, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1) << "no client";
  const int conn = accept4(listener, nullptr, nullptr, by_dup2 ? SOCK_CLOEXEC : 0);
  ASSERT_GE(conn, 0) << strerror(errno);
  close(listener);
  san_info info{};
  if (san) {
    ASSERT_EQ(san_getinfo(conn, &info), 0);
    ASSERT_EQ(info.mode, SAN_MODE_SHM) << "not on the fast path to begin with";
  }
  const int cat = RunCat(how, conn);
  if (san) {
    ASSERT_EQ(san_getinfo(conn, &info), 0);
    EXPECT_EQ(info.mode, SAN_MODE_TCP) << "the connection the child held did not move";
    EXPECT_NE(std::strstr(info.fallback, Via(how)), nullptr) << info.fallback;
  }
  close(conn);
  EXPECT_EQ(cat, 0) << "cat";
  int status = -1;
  ASSERT_EQ(waitpid(client, &status, 0), client);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "client: status " << status << " (exit " << WEXITSTATUS(status) << ")";
  close(port_pipe[1]);
}

std::string SpawnTestName(const ::testing::TestParamInfo<std::tuple<bool, Spawn>>& info) {
  static const char* const kNames[] = {"PosixSpawn", "PosixSpawnp", "System", "Popen", "PopenE"};
  return std::string(std::get<0>(info.param) ? "San_" : "Kernel_") +
         kNames[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(
    SanAndKernel, SpawnedChild,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(Spawn::kPosixSpawn, Spawn::kPosixSpawnp, Spawn::kSystem,
                                         Spawn::kPopen, Spawn::kPopenCloseOnExec)),
    SpawnTestName);

// A peer in a process of its own (a peer in this process refuses every move, so a test of what
// stays would pass whatever was tried): it echoes every byte until EOF.
[[noreturn]] void EchoPeer(int port_fd) {
  alarm(10);
  const int fd = ConnectToPortFrom(port_fd, true);
  if (fd < 0) _exit(21);
  char c;
  for (;;) {
    const ssize_t k = read(fd, &c, 1);
    if (k == 0) _exit(0);
    if (k < 0 || write(fd, &c, 1) != 1) _exit(22);
  }
}

// A SAN connection to an EchoPeer, close-on-exec here; `spawn` starts /bin/true with `actions`.
// Returns the connection's reason after the spawn ("" while on shm) once an echo went through.
std::string SpawnBesideConnection(void (*spawn)(posix_spawn_file_actions_t* actions)) {
  int port_pipe[2];
  EXPECT_EQ(pipe2(port_pipe, O_CLOEXEC), 0);
  const pid_t peer = fork();
  if (peer == 0) EchoPeer(port_pipe[0]);
  close(port_pipe[0]);
  const int listener = LoopbackListener(true);
  const uint16_t port = PortOf(listener);
  EXPECT_EQ(write(port_pipe[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  close(port_pipe[1]);
  pollfd p{listener, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1) << "no peer";
  const int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  close(listener);
  san_info info{};
  EXPECT_EQ(san_getinfo(conn, &info), 0);
  EXPECT_EQ(info.mode, SAN_MODE_SHM) << "not on the fast path to begin with";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, 0);
  spawn(&actions);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(san_getinfo(conn, &info), 0);
  char c = 'q';
  EXPECT_EQ(write(conn, &c, 1), 1);
  EXPECT_EQ(read(conn, &c, 1), 1);
  EXPECT_EQ(c, 'q');
  close(conn);
  int status = -1;
  EXPECT_EQ(waitpid(peer, &status, 0), peer);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer: status " << status;
  return info.mode == SAN_MODE_SHM ? "" : std::string("tcp: ") + info.fallback;
}

void SpawnTrue(const posix_spawn_file_actions_t* actions) {
  char* const argv[] = {const_cast<char*>("true"), nullptr};
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, "/bin/true", actions, nullptr, argv, environ), 0);
  int status = -1;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A child that does not hold the connection (close-on-exec, no action for it) leaves it on shm.
TEST(SpawnedChild, ConnectionTheChildDoesNotHoldStaysOnShm) {
  EXPECT_EQ(SpawnBesideConnection([](posix_spawn_file_actions_t* a) { SpawnTrue(a); }), "");
}

// Actions the layer did not see being added (here a copy of the object, which glibc accepts: its
// list is behind a pointer) may hand the child anything: every connection settles.
TEST(SpawnedChild, ActionsWithoutARecordSettleEveryConnection) {
  const std::string reason = SpawnBesideConnection([](posix_spawn_file_actions_t* a) {
    posix_spawn_file_actions_t copy;
    std::memcpy(&copy, a, sizeof copy);
    SpawnTrue(&copy);
  });
  EXPECT_NE(reason.find("posix_spawn"), std::string::npos) << reason;
}

}  // namespace
}  // namespace san::testing_support
