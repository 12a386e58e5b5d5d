#include "ftpd/fs/listing.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace san::ftp {
namespace {

char TypeChar(mode_t m) {
  if (S_ISDIR(m)) return 'd';
  if (S_ISLNK(m)) return 'l';
  if (S_ISCHR(m)) return 'c';
  if (S_ISBLK(m)) return 'b';
  if (S_ISFIFO(m)) return 'p';
  if (S_ISSOCK(m)) return 's';
  return '-';
}

std::string ModeString(mode_t m) {
  std::string s(10, '-');
  s[0] = TypeChar(m);
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) {
    if (m & (0400 >> i)) s[static_cast<size_t>(i + 1)] = rwx[i];
  }
  if (m & S_ISUID) s[3] = (m & S_IXUSR) ? 's' : 'S';
  if (m & S_ISGID) s[6] = (m & S_IXGRP) ? 's' : 'S';
  if (m & S_ISVTX) s[9] = (m & S_IXOTH) ? 't' : 'T';
  return s;
}

}  // namespace

Result<std::vector<DirEntry>> ReadDirectory(const files::Jail& jail, const std::string& vpath,
                                            bool all) {
  Result<UniqueFd> fd = jail.OpenFile(vpath, O_RDONLY | O_DIRECTORY);
  if (!fd.ok()) return fd.status();
  const int dfd = fd->release();
  DIR* dir = fdopendir(dfd);
  if (!dir) {
    KernelClose(dfd);
    return Status::FromErrno("fdopendir");
  }
  std::vector<DirEntry> out;
  while (dirent* d = readdir(dir)) {
    const std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    if (!all && name[0] == '.') continue;
    DirEntry e;
    e.name = name;
    if (fstatat(dirfd(dir), d->d_name, &e.st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // raced away
    if (S_ISLNK(e.st.st_mode)) {
      char buf[4096];
      const ssize_t n = readlinkat(dirfd(dir), d->d_name, buf, sizeof buf - 1);
      if (n > 0) e.link_target.assign(buf, static_cast<size_t>(n));
    }
    out.push_back(std::move(e));
  }
  closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

std::string FormatListLine(const DirEntry& e, time_t now) {
  char when[32];
  tm t{};
  gmtime_r(&e.st.st_mtime, &t);
  const bool recent = e.st.st_mtime <= now + 3600 && now - e.st.st_mtime < 180L * 24 * 3600;
  strftime(when, sizeof when, recent ? "%b %d %H:%M" : "%b %d  %Y", &t);
  char head[160];
  snprintf(head, sizeof head, "%s %3lu %-8u %-8u %12lld %s ", ModeString(e.st.st_mode).c_str(),
           static_cast<unsigned long>(e.st.st_nlink), e.st.st_uid, e.st.st_gid,
           static_cast<long long>(e.st.st_size), when);
  std::string line = head;
  line.append(e.name);
  if (!e.link_target.empty()) line.append(" -> ").append(e.link_target);
  return line;
}

std::string FormatTimeval(time_t t) {
  tm tmv{};
  gmtime_r(&t, &tmv);
  char buf[32];
  strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &tmv);
  return buf;
}

std::string FormatFacts(const DirEntry& e, bool writable, const std::string& type_override) {
  std::string type = type_override;
  std::string perm;
  if (type.empty()) {
    if (S_ISDIR(e.st.st_mode)) {
      type = "dir";
    } else if (S_ISREG(e.st.st_mode)) {
      type = "file";
    } else if (S_ISLNK(e.st.st_mode)) {
      type = "OS.unix=symlink";
    } else {
      type = "OS.unix=special";
    }
  }
  if (S_ISDIR(e.st.st_mode)) {
    perm = writable ? "elcmfp" : "el";
  } else {
    perm = writable ? "radfw" : "r";
  }
  std::string out = "type=" + type + ";";
  if (!S_ISDIR(e.st.st_mode)) out.append("size=").append(std::to_string(e.st.st_size)).append(";");
  out.append("modify=").append(FormatTimeval(e.st.st_mtime)).append(";");
  out.append("perm=").append(perm).append(";");
  char mode[16];
  snprintf(mode, sizeof mode, "%o", e.st.st_mode & 07777);
  out.append("UNIX.mode=").append(mode).append("; ").append(e.name);
  return out;
}

}  // namespace san::ftp
