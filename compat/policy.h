// Policy: which sockets the compatibility layer makes SAN-capable in this process.
//
// SAN_PROVIDER=off makes the layer a pure pass-through (no socket is ever managed). Otherwise
// AF_INET/AF_INET6 stream sockets are, subject to SAN_RULES / SAN_RULES_FILE (rules.h), checked
// with the program's name at socket() and with the address at connect() and listen(). Malformed
// rules are reported once on stderr and make every socket plain: we do not guess what was meant.
// Thread-safety: Get() builds the policy once (thread-safe); it is immutable afterwards.
#pragma once

#include <sys/socket.h>

#include "compat/rules.h"

namespace san::compat {

class Policy {
 public:
  static const Policy& Get();

  // A new socket(domain, type, protocol) is to be managed by sanlib.
  bool AdmitSocket(int domain, int type, int protocol) const;
  // A managed socket may use SAN with this peer (connect) or on this bound address (listen).
  bool AdmitAddress(const sockaddr* addr, socklen_t len) const;

 private:
  Policy();
  bool off_ = false;
  Rules rules_;
};

}  // namespace san::compat
