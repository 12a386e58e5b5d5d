// Test support: what a process's fds name (/proc/<pid>/fd's links: "pipe:[N]", "socket:[N]",
// "/memfd:...", a path...), for tests that check which files sanlib holds. Test-only.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace san::testing_support {

struct FdLink {
  std::string path;    // /proc/<pid>/fd/<n>: stat() it for the file itself
  std::string target;  // what readlink says it names
};

// The fds of process `pid` (0: this one; the listing's own fd included), empty if its /proc
// directory cannot be read.
inline std::vector<FdLink> FdLinks(pid_t pid = 0) {
  std::vector<FdLink> out;
  const std::string dir = pid ? "/proc/" + std::to_string(pid) + "/fd" : "/proc/self/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    FdLink link{dir + "/" + e->d_name, {}};
    char target[256];
    const ssize_t n = readlink(link.path.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    link.target.assign(target, static_cast<size_t>(n));
    out.push_back(std::move(link));
  }
  closedir(d);
  return out;
}

}  // namespace san::testing_support
