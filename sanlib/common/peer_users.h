// Peer users: which users' processes may be this process's SAN peers (SAN_PEER_USERS).
//
// Two processes that already talk over a TCP connection can send each other anything; a shm
// channel proved to join that connection's two ends (socket/late_upgrade.h) is no weaker, so by
// default ("any") a connection between two users moves to shm like any other. A site that wants
// shared memory only between processes of chosen users says so:
//   any                 every user (the default)
//   same                only processes of our own effective uid
//   ENTRY[,ENTRY...]    our own uid, and these: a uid (1001), a user name (www-data), a group
//                       (@sanusers or @1002: the peer user is a member, by its primary group or
//                       the group list)
// A connection a policy refuses stays kernel TCP on both ends, with the reason.
//
// Parse checks the syntax only; names are looked up when a peer is judged (the password and
// group databases may change while a server runs, and a library should not read them in a
// constructor). Thread-safety: a PeerUsers is immutable after Parse; Allows is safe from any
// thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "sanlib/common/status.h"

namespace san {

class PeerUsers {
 public:
  // "any": allows everyone.
  PeerUsers() = default;

  // EINVAL with the offending entry for a malformed policy.
  static Result<PeerUsers> Parse(std::string_view text);

  bool allows_everyone() const { return any_; }

  // Whether a peer running as `uid` may be a SAN peer of a process running as `own`.
  bool Allows(uid_t uid, uid_t own) const;

  // The policy as given (for reasons: "SAN_PEER_USERS=same").
  const std::string& text() const { return text_; }

 private:
  enum class Kind { kUid, kUser, kGid, kGroup };
  struct Entry {
    Kind kind;
    uint32_t id = 0;   // kUid, kGid
    std::string name;  // kUser, kGroup
  };
  bool Matches(const Entry& e, uid_t uid) const;

  bool any_ = true;
  std::string text_ = "any";
  std::vector<Entry> entries_;
};

}  // namespace san
