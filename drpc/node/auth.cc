#include "node/auth.h"

#include "core/token.h"

namespace san::drpc {

grpc::Status Auth::Check(const grpc::ServerContext& context) const {
  if (!token_) return grpc::Status::OK;
  const auto& md = context.client_metadata();
  auto it = md.find(kAuthMetadataKey);
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token (drpc --token-file)");
  }
  const std::string_view header(it->second.data(), it->second.size());
  const std::string_view token = TokenFromBearer(header);
  if (token.empty() || !TokenEquals(token, *token_)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token");
  }
  return grpc::Status::OK;
}

}  // namespace san::drpc
