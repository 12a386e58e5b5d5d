#include "transport/polling.h"

#include <cstdlib>
#include <cstring>

namespace san::drpc {

const char* SelectPollingEngine() {
  if (const char* set = getenv("GRPC_POLL_STRATEGY"); set && *set) return set;
  const char* provider = getenv("SAN_PROVIDER");
  if (provider && strcmp(provider, "off") == 0) return "";
  setenv("GRPC_POLL_STRATEGY", "poll", 1);
  return "poll";
}

}  // namespace san::drpc
