// FakeEnvironment: an environment of the test's own for the settings parsers, which read through
// a getenv-like function pointer (Config::Parse, ParseWithFile, ConfigFilePath). Installing one
// makes FakeGetenv look names up in it until the next is installed. Test-only; one test at a time
// (the current environment is a single process-wide pointer).
#pragma once

#include <map>
#include <string>

namespace san::testing_support {

using FakeEnvironment = std::map<std::string, std::string>;

inline const FakeEnvironment*& CurrentFakeEnvironment() {
  static const FakeEnvironment* current = nullptr;
  return current;
}

// Makes FakeGetenv read `env` (which must outlive its use).
inline void UseFakeEnvironment(const FakeEnvironment& env) { CurrentFakeEnvironment() = &env; }

inline const char* FakeGetenv(const char* name) {
  const FakeEnvironment* env = CurrentFakeEnvironment();
  if (env == nullptr) return nullptr;
  const auto it = env->find(name);
  return it == env->end() ? nullptr : it->second.c_str();
}

}  // namespace san::testing_support
