// conn-bench: the worker processes of one measurement, and the pipes the coordinator talks to them
// through. The coordinator never touches a transport itself; every wait on a child is bounded, and
// a child that does not finish in time is SIGKILLed and reported as hung (its CPU time is still
// collected by wait4).
//
// Reports are plain structs (trivially copyable) written whole on a pipe. Not thread-safe: one
// coordinator thread owns its Children.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>

#include "files/write_all.h"

namespace san::connbench {

struct Child {
  pid_t pid = -1;
  int from_child = -1;  // what the child writes to `to_parent`
  int to_child = -1;    // what the child reads from `from_parent`
};

// Forks; the child runs body(to_parent, from_parent) and _exits with its return value.
Child Spawn(const std::function<int(int to_parent, int from_parent)>& body);

// Reads exactly len bytes within timeout_ms. False on timeout, EOF or error.
bool ReadWithin(int fd, void* buf, size_t len, int timeout_ms);
// Writes all of len bytes (pipes: never partial for our small structs, but looped anyway).
using files::WriteAll;

// How a child ended.
struct Ending {
  bool hung = false;   // did not exit in time: SIGKILLed
  bool clean = false;  // exited with status 0
  std::string how;     // "exit 0", "exit 3", "signal 11", "killed after 20 s"
  double cpu_us = 0;   // user + system of the child (all its threads)
};
// Waits for the child to exit within timeout_ms, else SIGKILLs it; closes its pipes.
Ending Reap(Child* child, int timeout_ms);

// Copies a message into a fixed char array of a report, truncated and terminated.
void SetText(char* dst, size_t size, const std::string& text);

}  // namespace san::connbench
