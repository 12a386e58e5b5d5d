#include "sanlib/fabric/registry.h"

#include <string>

#include "sanlib/fabric/shm/shm_provider.h"
#ifdef SAN_HAVE_VERBS
#include "sanlib/fabric/verbs/verbs_provider.h"
#endif

namespace san::fabric {
namespace {

// The verbs provider, opened once: nullptr (and why) where this host has no RDMA.
Provider* Verbs(const char** why_not) {
#ifdef SAN_HAVE_VERBS
  static std::string* const why = new std::string();  // never destroyed, like the providers
  static Provider* const verbs = verbs::VerbsProvider::Open(why);
  if (why_not != nullptr) *why_not = why->c_str();
  return verbs;
#else
  if (why_not != nullptr) {
    // Also what a sanitizer build's uninstrumented preload library says: it is compiled from the
    // layers' sources without libibverbs (compat/CMakeLists.txt).
    *why_not = "verbs: not built into this library (SAN_WITH_VERBS, or no libibverbs headers)";
  }
  return nullptr;
#endif
}

}  // namespace

Provider* GetProvider(std::string_view name) {
  // Function-local statics: built on first use, thread-safe, and deliberately never destroyed
  // (endpoints in other threads or in atexit handlers may still use them at exit).
  if (name == "shm") {
    static Provider* const shm = new shm::ShmProvider();
    return shm;
  }
  if (name == "verbs") return Verbs(nullptr);
  return nullptr;
}

const char* WhyUnavailable(std::string_view name) {
  if (name == "shm") return nullptr;
  if (name == "verbs") {
    const char* why = nullptr;
    return Verbs(&why) ? nullptr : why;
  }
  return "unknown provider name";
}

}  // namespace san::fabric
