// rpcgen_via: a compiler for the RPC language producing C for libtirpc, option-compatible with
// rpcgen. See docs/rpcgen_via.md.
#include <cstdio>

#include "rpcgen_via/driver.h"
#include "rpcgen_via/options.h"

int main(int argc, char** argv) {
  san::rpcgen::Options options;
  std::string error;
  if (!san::rpcgen::ParseOptions(argc, argv, &options, &error)) {
    fprintf(stderr, "rpcgen_via: %s\n%s", error.c_str(), san::rpcgen::Usage("rpcgen_via").c_str());
    return 1;
  }
  if (options.help) {
    fputs(san::rpcgen::Usage("rpcgen_via").c_str(), stdout);
    return 0;
  }
  if (options.version) {
    puts("rpcgen_via 0.1 (RPC language compiler for libtirpc)");
    return 0;
  }
  return san::rpcgen::RunCompiler(options, stderr);
}
