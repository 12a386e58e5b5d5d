#include "drpc/node/auth.h"

#include "drpc/core/token.h"

namespace san::drpc {

grpc::Status Auth::Check(const grpc::ServerContext& context, std::optional<uid_t> peer_uid) const {
  if (open_) return grpc::Status::OK;
  // A node without a token ignores one sent anyway (e.g. from $DRPC_TOKEN_FILE): the Unix-user
  // check decides.
  const auto& md = context.client_metadata();
  auto it = token_ ? md.find(kAuthMetadataKey) : md.end();
  if (it != md.end()) {
    const std::string_view header(it->second.data(), it->second.size());
    const std::string_view token = TokenFromBearer(header);
    if (!token.empty() && TokenEquals(token, *token_)) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token");
  }
  if (peer_uid && uids_.count(*peer_uid)) return grpc::Status::OK;
  std::string why = token_ ? "no token (drpc --token-file)" : "no token accepted here";
  if (!uids_.empty()) {
    why += peer_uid ? ", and uid " + std::to_string(*peer_uid) + " is not allowed"
                    : ", and not a local user's connection (uid unknown)";
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
}

}  // namespace san::drpc
