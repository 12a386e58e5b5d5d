// libFuzzer target for the SAN_RULES parser (built with clang: -fsanitize=fuzzer).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "compat/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  san::compat::Rules rules;
  std::string error;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (san::compat::Rules::Parse(text, "fuzz", &rules, &error)) {
    rules.Evaluate(san::compat::RuleSubject{"prog", nullptr, 0});
  }
  return 0;
}
