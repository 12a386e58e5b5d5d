#include "fabric/registry.h"

#include "fabric/loopback/loopback_provider.h"
#include "fabric/shm/shm_provider.h"

namespace san::fabric {

Provider* GetProvider(std::string_view name) {
  // Function-local statics: built on first use, thread-safe, and deliberately never destroyed
  // (endpoints in other threads or in atexit handlers may still use them at exit).
  if (name == "shm") {
    static Provider* const shm = new shm::ShmProvider();
    return shm;
  }
  if (name == "loopback") {
    static Provider* const loopback = new loopback::LoopbackProvider();
    return loopback;
  }
  return nullptr;
}

}  // namespace san::fabric
