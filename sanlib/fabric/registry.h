// The provider registry: every fabric backend, by name, from one explicit list.
//
// Providers are created on first use (no static-initialiser registration: in a preloaded library,
// initialisation order is a hazard) and live for the rest of the process.
// Thread-safety: GetProvider may be called from any thread. Ownership: the registry owns the
// providers; callers keep the raw pointer for as long as they like.
#pragma once

#include <string_view>

#include "sanlib/fabric/provider.h"

namespace san::fabric {

// "shm" or "verbs"; nullptr for an unknown name or an unavailable backend (verbs: not built, or no
// RDMA device / rdma_cm on this host -- opened once, on first use). The tests' in-process
// loopback provider is not here: it is built with the tests (tests/support/loopback).
Provider* GetProvider(std::string_view name);

// Why GetProvider(name) returns nullptr ("verbs: no RDMA device", ...), for error messages and test
// skips; nullptr when the provider is available. Opens the provider if it was not yet.
const char* WhyUnavailable(std::string_view name);

}  // namespace san::fabric
