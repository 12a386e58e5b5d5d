// Auth: who may call a node.
//
// Two kinds of credential, either of which admits a call (drpcd may enable one or both):
//   - a token: the call carries "authorization: Bearer <token>" equal to the node's token file;
//   - a Unix user: the connection comes from this host and its socket belongs to a uid drpcd was
//     told to allow (--allow-uid; the uid is learnt once per connection at accept, see
//     common/peer_uid.h). Remote clients have no uid here: they need the token.
// A call that presents a wrong token to a node with a token is refused even from an allowed uid:
// a bad credential never passes (a node without a token ignores one sent anyway). Ping is open in
// every mode: it is the liveness/latency probe and answers only with the bytes it was given.
// Open mode (drpcd --no-auth, for a trusted test network) lets every call through; Exec and
// Submit are still limited by the command policy, whose default is empty.
// Thread-safety: immutable after construction.
#pragma once

#include <sys/types.h>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <optional>
#include <set>
#include <string>

namespace san::drpc {

class Auth {
 public:
  static Auth Open() { return Auth(std::nullopt, {}, true); }
  // token: none = no token admits; uids: those admitted by the Unix-user check (empty: none).
  static Auth Require(std::optional<std::string> token, std::set<uid_t> uids) {
    return Auth(std::move(token), std::move(uids), false);
  }

  // OK, or UNAUTHENTICATED naming what was missing or wrong (never the expected token).
  // peer_uid: the connection's local uid, if it is a connection within this host.
  grpc::Status Check(const grpc::ServerContext& context, std::optional<uid_t> peer_uid) const;
  bool open() const { return open_; }
  bool checks_uids() const { return !uids_.empty(); }

 private:
  Auth(std::optional<std::string> token, std::set<uid_t> uids, bool open)
      : token_(std::move(token)), uids_(std::move(uids)), open_(open) {}
  std::optional<std::string> token_;
  std::set<uid_t> uids_;
  bool open_;
};

}  // namespace san::drpc
