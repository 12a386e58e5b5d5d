// libFuzzer target for ftpd's and ftp_client's parsers (fuzz_body.h). Built only with clang:
//   CC=clang CXX=clang++ cmake -B build/fuzz -DSAN_SANITIZE=address && \
//   cmake --build build/fuzz --target ftpd_command_fuzz && build/fuzz/bin/ftpd_command_fuzz
//   -max_total_time=60
#include "fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  san::ftp::fuzz::OneInput(data, size);
  return 0;
}
