// Tokens: the shared secret a drpc client presents (gRPC metadata "authorization: Bearer <t>")
// and drpcd checks.
//
// A token file holds one token (blanks and a trailing newline trimmed, 16..1024 printable
// characters). Like ssh keys, a file that group or others may read or write is refused (EPERM):
// a token anybody can read is no secret. Comparison takes time independent of where the first
// difference is. Thread-safety: stateless functions.
#pragma once

#include <string>
#include <string_view>

#include "sanlib/common/status.h"

namespace san::drpc {

inline constexpr char kAuthMetadataKey[] = "authorization";

Result<std::string> LoadTokenFile(const std::string& path);
// The token text itself (after trimming), as a file's contents would be checked.
Result<std::string> ParseToken(std::string_view text);
bool TokenEquals(std::string_view a, std::string_view b);
// "Bearer <token>" <-> token; an empty view when the header is not a bearer token.
std::string BearerHeader(std::string_view token);
std::string_view TokenFromBearer(std::string_view header);

}  // namespace san::drpc
