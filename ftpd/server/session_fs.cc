// Session: names and the file system (PWD CWD MKD RMD DELE RNFR/RNTO SIZE MDTM MLST and the
// listings). Every path goes through ResolveVirtual and the Jail.
#include <fcntl.h>
#include <fnmatch.h>

#include <ctime>

#include "files/virtual_path.h"
#include "ftpd/fs/listing.h"
#include "ftpd/server/session.h"

namespace san::ftp {
namespace {

// RFC 959 quoting for 257 replies: a '"' inside the name is doubled.
std::string Quote(const std::string& path) {
  std::string out = "\"";
  for (char c : path) {
    out.push_back(c);
    if (c == '"') out.push_back('"');
  }
  out.push_back('"');
  return out;
}

}  // namespace

std::optional<std::string> Session::Resolve(const std::string& arg) {
  std::optional<std::string> p = files::ResolveVirtual(cwd_, arg);
  if (!p) Reply(553, "File name not allowed.");
  return p;
}

bool Session::RequireWrite() {
  if (writable_) return true;
  Reply(550, "Permission denied (read-only account).");
  return false;
}

std::optional<std::string> Session::ResolveForWrite(const std::string& arg) {
  if (!RequireWrite()) return std::nullopt;
  return Resolve(arg);
}

void Session::ReplyFsResult(const Status& s, const std::string& what, int code,
                            std::string_view text) {
  if (s.ok()) {
    Reply(code, text);
  } else {
    ReplyFsError(s, what);
  }
}

void Session::ReplyFsError(const Status& s, const std::string& what) {
  switch (s.code()) {
    case ENOENT:
    case ENOTDIR:
      Reply(550, what + ": No such file or directory.");
      break;
    case EACCES:
    case EPERM:
      Reply(550, what + ": Permission denied.");
      break;
    case EEXIST:
      Reply(550, what + ": File exists.");
      break;
    case ENOTEMPTY:
      Reply(550, what + ": Directory not empty.");
      break;
    case EISDIR:
      Reply(550, what + ": Is a directory.");
      break;
    case EXDEV:
    case ELOOP:
      Reply(550, what + ": Path not allowed.");
      break;
    case ENOSPC:
    case EDQUOT:
      Reply(452, what + ": Insufficient storage space.");
      break;
    default:
      Reply(550, what + ": " + s.ToString());
  }
}

void Session::DoPwd() { Reply(257, Quote(cwd_) + " is the current directory."); }

void Session::DoCwd(const std::string& arg) {
  std::optional<std::string> p = Resolve(arg);
  if (!p) return;
  Result<struct stat> st = jail_->Stat(*p);
  if (!st.ok()) {
    ReplyFsError(st.status(), "CWD");
    return;
  }
  if (!S_ISDIR(st->st_mode)) {
    Reply(550, "CWD: Not a directory.");
    return;
  }
  cwd_ = *p;
  Reply(250, "Directory successfully changed.");
}

void Session::DoMkd(const Command& cmd) {
  std::optional<std::string> p = ResolveForWrite(cmd.arg);
  if (!p) return;
  ReplyFsResult(jail_->MakeDir(*p, 0755), "MKD", 257, Quote(*p) + " created.");
}

void Session::DoRmd(const Command& cmd) {
  std::optional<std::string> p = ResolveForWrite(cmd.arg);
  if (!p) return;
  if (*p == "/") {
    Reply(550, "RMD: cannot remove the root.");
    return;
  }
  ReplyFsResult(jail_->RemoveDir(*p), "RMD", 250, "Directory removed.");
}

void Session::DoDele(const Command& cmd) {
  std::optional<std::string> p = ResolveForWrite(cmd.arg);
  if (!p) return;
  ReplyFsResult(jail_->Unlink(*p), "DELE", 250, "File deleted.");
}

void Session::DoRnfr(const Command& cmd) {
  std::optional<std::string> p = ResolveForWrite(cmd.arg);
  if (!p) return;
  Result<struct stat> st = jail_->Lstat(*p);
  if (!st.ok()) {
    ReplyFsError(st.status(), "RNFR");
    return;
  }
  if (*p == "/") {
    Reply(550, "RNFR: cannot rename the root.");
    return;
  }
  rename_from_ = *p;
  Reply(350, "Ready for RNTO.");
}

void Session::DoRnto(const Command& cmd) {
  std::optional<std::string> p = ResolveForWrite(cmd.arg);
  if (!p) return;
  ReplyFsResult(jail_->Rename(*rename_from_, *p), "RNTO", 250, "Rename successful.");
}

void Session::DoSize(const Command& cmd) {
  std::optional<std::string> p = Resolve(cmd.arg);
  if (!p) return;
  Result<struct stat> st = jail_->Stat(*p);
  if (!st.ok()) {
    ReplyFsError(st.status(), "SIZE");
    return;
  }
  if (!S_ISREG(st->st_mode)) {
    Reply(550, "SIZE: not a regular file.");
    return;
  }
  Reply(213, std::to_string(st->st_size));
}

void Session::DoMdtm(const Command& cmd) {
  std::optional<std::string> p = Resolve(cmd.arg);
  if (!p) return;
  Result<struct stat> st = jail_->Stat(*p);
  if (!st.ok()) {
    ReplyFsError(st.status(), "MDTM");
    return;
  }
  if (!S_ISREG(st->st_mode)) {
    Reply(550, "MDTM: not a regular file.");
    return;
  }
  Reply(213, FormatTimeval(st->st_mtime));
}

void Session::DoMlst(const Command& cmd) {
  std::optional<std::string> p = Resolve(cmd.has_arg ? cmd.arg : std::string("."));
  if (!p) return;
  Result<struct stat> st = jail_->Stat(*p);
  if (!st.ok()) {
    ReplyFsError(st.status(), "MLST");
    return;
  }
  DirEntry e{*p, st.value(), ""};
  Reply(250, "Listing " + *p + "\n" + FormatFacts(e, writable_) + "\nEnd");
}

// The listing text for LIST ('L'), NLST ('N'), MLSD ('M') or STAT <path> ('S'), CRLF lines.
Result<std::string> Session::BuildListing(const std::string& raw_arg, char kind, bool* is_dir) {
  // ls-style options ("-la", "-a") that clients send with LIST: honour -a, ignore the rest.
  std::string arg = raw_arg;
  bool all = kind == 'M';
  while (kind != 'M' && !arg.empty() && arg[0] == '-') {
    const size_t sp = arg.find(' ');
    const std::string opts = arg.substr(0, sp);
    if (opts.find('a') != std::string::npos) all = true;
    arg = sp == std::string::npos ? std::string() : arg.substr(sp + 1);
  }
  std::optional<std::string> p = files::ResolveVirtual(cwd_, arg.empty() ? std::string(".") : arg);
  if (!p) return Status(EINVAL, "path");
  Result<struct stat> st = jail_->Stat(*p);
  std::vector<DirEntry> entries;
  std::string prefix;  // what the client typed before the pattern ("d/" for "d/*.txt")
  const std::string base = files::BaseName(*p);
  if (!st.ok() && kind != 'M' && base.find_first_of("*?[") != std::string::npos) {
    // A wildcard in the last component (mget's "NLST *.txt"): match the parent's entries, as a
    // shell would (no dot files unless the pattern starts with a dot).
    Result<std::vector<DirEntry>> read = ReadDirectory(*jail_, files::DirName(*p), true);
    if (!read.ok()) return read.status();
    for (DirEntry& e : *read) {
      if (fnmatch(base.c_str(), e.name.c_str(), FNM_PERIOD) == 0) entries.push_back(std::move(e));
    }
    if (entries.empty()) return Status(ENOENT, "no match");
    const size_t slash = arg.rfind('/');
    if (slash != std::string::npos) prefix = arg.substr(0, slash + 1);
    *is_dir = true;
  } else if (!st.ok()) {
    return st.status();
  } else {
    *is_dir = S_ISDIR(st->st_mode);
  }
  if (!entries.empty()) {
    // matched above
  } else if (*is_dir) {
    Result<std::vector<DirEntry>> read = ReadDirectory(*jail_, *p, all);
    if (!read.ok()) return read.status();
    entries = std::move(read.value());
  } else {
    if (kind == 'M') return Status(ENOTDIR, "MLSD");
    DirEntry e;
    e.name = arg.empty() ? files::BaseName(*p) : arg;
    if (Result<struct stat> l = jail_->Lstat(*p); l.ok()) e.st = l.value();
    entries.push_back(std::move(e));
  }
  const time_t now = time(nullptr);
  std::string out;
  for (const DirEntry& e : entries) {
    if (kind == 'N') {
      out.append(prefix).append(e.name);
    } else if (kind == 'M') {
      out.append(FormatFacts(e, writable_));
    } else {
      out.append(FormatListLine(e, now));
    }
    out.append(kind == 'S' ? "\n" : "\r\n");
  }
  return out;
}

void Session::DoList(const Command& cmd, char kind) {
  bool is_dir = false;
  Result<std::string> text = BuildListing(cmd.arg, kind, &is_dir);
  if (kind == 'S') {  // STAT <path>: over the control connection
    if (!text.ok()) {
      ReplyFsError(text.status(), "STAT");
      return;
    }
    std::string body = text.value();
    if (!body.empty() && body.back() == '\n') body.pop_back();
    Reply(213, "Status of " + cmd.arg + ":\n" + body + "\nEnd of status");
    return;
  }
  if (!text.ok()) {
    ResetData();
    ReplyFsError(text.status(), kind == 'M' ? "MLSD" : kind == 'N' ? "NLST" : "LIST");
    return;
  }
  Result<Socket> data = OpenData();
  if (!data.ok()) return;  // OpenData replied
  Reply(150, "Here comes the directory listing.");
  uint64_t bytes = 0;
  const TransferEnd end = SendFrom(-1, &text.value(), data.value(), &bytes);
  FinishTransfer(end, data.value(), bytes, 0);
}

}  // namespace san::ftp
