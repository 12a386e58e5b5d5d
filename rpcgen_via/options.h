// The command line of rpcgen_via, rpcgen's: single-letter options, bundled or not ("-aNM",
// "-s tcp", "-stcp", "-K 30", "-DX=1"), plus --help and --version.
//
// Modes, as rpcgen: no file flag generates header, XDR routines, client stubs and server (next to
// the input file), -a adds the samples and Makefile; one of -c -h -l -m -Sc -Ss -Sm, or -s alone,
// generates that one file to -o or standard output. -t/-T (dispatch tables), -n netid and -b
// (SunOS 4.1 compatibility) are refused with a clear message.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace san::rpcgen {

enum class OutputKind {
  kHeader,
  kXdr,
  kClient,
  kServer,
  kServerNoMain,
  kSampleClient,
  kSampleServer,
  kMakefile
};

struct Options {
  bool all_files = false;  // no single-file flag: every standard file (plus samples with -a)
  bool samples = false;    // -a
  bool single = false;     // one file (the one in `kind`)
  OutputKind kind = OutputKind::kHeader;
  std::string infile;                 // "" = standard input
  std::string outfile;                // -o
  std::vector<std::string> defines;   // -D: "NAME" or "NAME=VALUE"
  std::vector<std::string> nettypes;  // -s
  std::string cpp_dir;                // -Y
  bool mt_safe = false;               // -M
  bool newstyle = false;              // -N
  bool inetd = false;                 // -I
  int closedown_seconds = -2;         // -K; -2 = not given
  bool syslog_errors = false;         // -L
  bool help = false;
  bool version = false;
};

// Parses argv (argv[0] is the program name). On failure returns false with a message in *error.
bool ParseOptions(int argc, const char* const* argv, Options* options, std::string* error);

// The --help text.
std::string Usage(const std::string& program);

}  // namespace san::rpcgen
