// Auth: who may call a node.
//
// Token mode (the default): every call but Ping must carry "authorization: Bearer <token>" equal
// to the node's token file. Ping is open: it is the liveness/latency probe and answers only with
// the bytes it was given. Open mode (drpcd --no-auth, for a trusted test network) lets every call
// through; Exec and Submit are still limited by the command policy, whose default is empty.
// Thread-safety: immutable after construction.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <optional>
#include <string>

namespace san::drpc {

class Auth {
 public:
  static Auth Token(std::string token) { return Auth(std::move(token)); }
  static Auth Open() { return Auth(std::nullopt); }

  // OK, or UNAUTHENTICATED naming what was missing or wrong (never the expected token).
  grpc::Status Check(const grpc::ServerContext& context) const;
  bool open() const { return !token_.has_value(); }

 private:
  explicit Auth(std::optional<std::string> token) : token_(std::move(token)) {}
  std::optional<std::string> token_;
};

}  // namespace san::drpc
