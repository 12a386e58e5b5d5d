// The provider registry: every fabric backend, by name, from one explicit list.
//
// Providers are created on first use (no static-initialiser registration: in a preloaded library,
// initialisation order is a hazard) and live for the rest of the process.
// Thread-safety: GetProvider may be called from any thread. Ownership: the registry owns the
// providers; callers keep the raw pointer for as long as they like.
#pragma once

#include <string_view>

#include "fabric/provider.h"

namespace san::fabric {

// "shm" or "loopback" (later "verbs"); nullptr for an unknown name or an unavailable backend.
Provider* GetProvider(std::string_view name);

}  // namespace san::fabric
