#include "compat/exec_target.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

#include "sanlib/common/unique_fd.h"

namespace san::compat {
namespace {

constexpr int kMaxScriptDepth = 4;  // the kernel allows a few levels of #! interpreters

bool PreloadNamesLayer(char* const envp[]) {
  if (!envp) return false;
  constexpr std::string_view kKey = "LD_PRELOAD=";
  for (char* const* e = envp; *e; ++e) {
    std::string_view var(*e);
    if (var.substr(0, kKey.size()) != kKey) continue;
    std::string_view list = var.substr(kKey.size());
    // Entries are separated by ':' or spaces (ld.so(8)).
    while (!list.empty()) {
      const size_t end = list.find_first_of(": ");
      std::string_view entry = list.substr(0, end);
      const size_t slash = entry.rfind('/');
      const std::string_view base =
          slash == std::string_view::npos ? entry : entry.substr(slash + 1);
      if (base.substr(0, 14) == "libsan_preload") return true;
      if (end == std::string_view::npos) break;
      list.remove_prefix(end + 1);
    }
  }
  return false;
}

// Secure mode (AT_SECURE): the loader ignores a preload with a '/' and most others.
bool BecomesPrivileged(const struct stat& st) {
  if (getuid() != geteuid() || getgid() != getegid()) return true;
  return ((st.st_mode & S_ISUID) && st.st_uid != getuid()) ||
         ((st.st_mode & S_ISGID) && st.st_gid != getgid());
}

template <typename Ehdr, typename Phdr>
bool HasInterpreter(int fd, const unsigned char* head, size_t head_len) {
  if (head_len < sizeof(Ehdr)) return false;
  Ehdr eh;
  memcpy(&eh, head, sizeof eh);
  if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum > 4096) return false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Phdr ph;
    const off_t at = static_cast<off_t>(eh.e_phoff + uint64_t{i} * sizeof ph);
    if (pread(fd, &ph, sizeof ph, at) != static_cast<ssize_t>(sizeof ph)) return false;
    if (ph.p_type == PT_INTERP) return true;
  }
  return false;
}

bool RunsLayer(const char* path, int depth) {
  if (!path || depth > kMaxScriptDepth) return true;
  UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd.valid()) {
    // Not readable (execute-only) or not there (the exec will fail; everything is put back).
    return stat(path, &st) != 0 || !BecomesPrivileged(st);
  }
  if (fstat(fd.get(), &st) != 0 || BecomesPrivileged(st)) return false;
  unsigned char head[256];
  const ssize_t n = pread(fd.get(), head, sizeof head, 0);
  if (n < 4) return true;
  if (memcmp(head, ELFMAG, SELFMAG) == 0) {
    if (head[EI_CLASS] != ELFCLASS64) return false;  // this layer is a 64-bit library
    return HasInterpreter<Elf64_Ehdr, Elf64_Phdr>(fd.get(), head, static_cast<size_t>(n));
  }
  if (head[0] == '#' && head[1] == '!') {
    std::string_view line(reinterpret_cast<const char*>(head) + 2, static_cast<size_t>(n) - 2);
    line = line.substr(0, line.find('\n'));
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) return true;
    line.remove_prefix(start);
    const std::string interpreter(line.substr(0, line.find_first_of(" \t")));
    return RunsLayer(interpreter.c_str(), depth + 1);
  }
  return true;
}

}  // namespace

bool NewImageRunsLayer(const char* path, char* const envp[]) {
  return PreloadNamesLayer(envp) && RunsLayer(path, 0);
}

std::string ResolveOnPath(const char* file) {
  if (!file || !*file || strchr(file, '/')) return file ? file : "";
  const char* path = getenv("PATH");
  std::string_view dirs = path ? path : "/bin:/usr/bin";
  for (;;) {
    const size_t end = dirs.find(':');
    std::string candidate(dirs.substr(0, end));
    if (candidate.empty()) candidate.push_back('.');  // not = ".": GCC 12 -Wrestrict false positive
    candidate.append("/").append(file);
    struct stat st;
    if (access(candidate.c_str(), X_OK) == 0 && stat(candidate.c_str(), &st) == 0 &&
        S_ISREG(st.st_mode)) {
      return candidate;
    }
    if (end == std::string_view::npos) break;
    dirs.remove_prefix(end + 1);
  }
  return file;
}

}  // namespace san::compat
