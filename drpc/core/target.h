// Target: one node as the CLI names it -- "san://host:port" (gRPC over SAN sockets) or
// "host:port" / "tcp://host:port" (gRPC over kernel TCP); the port may be left out.
//
// Pure string logic, outside input (command line, host files): unit-tested and fuzzed.
// Thread-safety: stateless functions; Target is a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sanlib/common/status.h"

namespace san::drpc {

inline constexpr uint16_t kDefaultPort = 7467;

struct Target {
  std::string spec;  // as written: how output names this node
  bool san = false;  // san:// : carried over SAN sockets (falls back to TCP if the peer cannot)
  std::string host;  // name or address, without IPv6 brackets
  uint16_t port = kDefaultPort;
};

// "san://h:p", "tcp://h:p", "h:p", "h", "[v6addr]:p", "[v6addr]". EINVAL for an empty host, a
// bad port (not 1-65535), an unknown scheme, unbalanced brackets or characters a host name or
// address cannot contain.
Result<Target> ParseTarget(std::string_view spec, uint16_t default_port = kDefaultPort);
// drpcd --listen: "host:port", "[v6]:port" or "host"; port 0 lets the kernel choose; no scheme.
Result<Target> ParseListenAddress(std::string_view spec);

}  // namespace san::drpc
