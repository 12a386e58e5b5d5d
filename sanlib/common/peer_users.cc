#include "sanlib/common/peer_users.h"

#include <grp.h>
#include <pwd.h>

#include <cerrno>
#include <cstdlib>

namespace san {
namespace {

// A decimal id, no sign, no spaces, below 2^32 - 1 (the kernel's "no id").
bool ParseId(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= 0xffffffffu) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

// A user or group name as useradd(8) allows it: letters, digits, '_', '-', '.', a final '$';
// not all digits (that is an id, or one out of range).
bool IsName(std::string_view s) {
  if (s.empty() || s.size() > 32 || s[0] == '-') return false;
  if (s.find_first_not_of("0123456789") == std::string_view::npos) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || (c == '$' && i + 1 == s.size());
    if (!ok) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The user's passwd entry through the reentrant call (buffer sized by sysconf, grown on ERANGE).
bool LookUpUser(uid_t uid, const char* name, passwd* pw, std::vector<char>* buf) {
  buf->resize(1024);
  for (int tries = 0; tries < 8; ++tries) {
    passwd* found = nullptr;
    const int rc = name ? getpwnam_r(name, pw, buf->data(), buf->size(), &found)
                        : getpwuid_r(uid, pw, buf->data(), buf->size(), &found);
    if (rc == ERANGE) {
      buf->resize(buf->size() * 2);
      continue;
    }
    return rc == 0 && found != nullptr;
  }
  return false;
}

bool LookUpGroupId(const std::string& name, gid_t* gid) {
  std::vector<char> buf(1024);
  for (int tries = 0; tries < 8; ++tries) {
    group gr{};
    group* found = nullptr;
    const int rc = getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found);
    if (rc == ERANGE) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc != 0 || !found) return false;
    *gid = gr.gr_gid;
    return true;
  }
  return false;
}

// Is `uid` (by its passwd entry) a member of `gid`, by primary group or group list?
bool UserInGroup(uid_t uid, gid_t gid) {
  passwd pw{};
  std::vector<char> buf;
  if (!LookUpUser(uid, nullptr, &pw, &buf)) return false;
  if (pw.pw_gid == gid) return true;
  std::vector<gid_t> groups(32);
  int n = static_cast<int>(groups.size());
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i) {
    if (groups[static_cast<size_t>(i)] == gid) return true;
  }
  return false;
}

}  // namespace

Result<PeerUsers> PeerUsers::Parse(std::string_view text) {
  PeerUsers p;
  const std::string_view whole = Trim(text);
  p.text_ = std::string(whole);
  if (whole == "any") return p;
  p.any_ = false;
  if (whole == "same") return p;
  std::string_view rest = whole;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    const bool group = !item.empty() && item[0] == '@';
    const std::string_view name = group ? item.substr(1) : item;
    Entry e{};
    if (item == "same") {
      // Our own uid is always allowed: "same,www-data" says the same as "www-data".
    } else if (ParseId(name, &e.id)) {
      e.kind = group ? Kind::kGid : Kind::kUid;
    } else if (IsName(name) && name != "any" && name != "same") {
      e.kind = group ? Kind::kGroup : Kind::kUser;
      e.name = std::string(name);
    } else {
      return Status(EINVAL, "SAN_PEER_USERS entry");
    }
    if (item != "same") p.entries_.push_back(std::move(e));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return p;
}

bool PeerUsers::Matches(const Entry& e, uid_t uid) const {
  switch (e.kind) {
    case Kind::kUid:
      return uid == e.id;
    case Kind::kUser: {
      passwd pw{};
      std::vector<char> buf;
      return LookUpUser(0, e.name.c_str(), &pw, &buf) && pw.pw_uid == uid;
    }
    case Kind::kGid:
      return UserInGroup(uid, e.id);
    case Kind::kGroup: {
      gid_t gid = 0;
      return LookUpGroupId(e.name, &gid) && UserInGroup(uid, gid);
    }
  }
  return false;
}

bool PeerUsers::Allows(uid_t uid, uid_t own) const {
  if (any_ || uid == own) return true;
  for (const Entry& e : entries_) {
    if (Matches(e, uid)) return true;
  }
  return false;
}

}  // namespace san
