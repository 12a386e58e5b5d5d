// What the node and the client agree on about moving a file, beside drpc.proto's messages: the
// chunk size of Push/Pull in the call's messages, the trailer carrying Pull's checksum, and the
// length of a data connection's ticket (docs/drpc.md "Data connections").
// Thread-safety: constants only.
#pragma once

#include <cstddef>

namespace san::drpc {

inline constexpr size_t kFileChunkBytes = 256 * 1024;
inline constexpr char kChecksumTrailer[] = "drpc-checksum";
inline constexpr size_t kTicketBytes = 16;

}  // namespace san::drpc
