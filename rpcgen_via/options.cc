#include "rpcgen_via/options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rpcgen_via/code_writer.h"

namespace san::rpcgen {

std::string Usage(const std::string& program) {
  return Cat(
      "usage: ", program, " infile\n", "       ", program,
      " [-aCLNM] [-Dname[=value]] [-i size] [-I [-K seconds]] [-Y path] infile\n", "       ",
      program, " [-c | -h | -l | -m | -Sc | -Ss | -Sm] [-o outfile] [infile]\n", "       ", program,
      " [-s nettype]* [-o outfile] [infile]\n",
      "options:\n"
      "-a\t\tgenerate all files, including samples\n"
      "-c\t\tgenerate XDR routines\n"
      "-C\t\tANSI C mode (always on)\n"
      "-Dname[=value]\tdefine a symbol for the C preprocessor\n"
      "-h\t\tgenerate header file\n"
      "-i size\t\taccepted for compatibility (no inline code is generated; same bytes)\n"
      "-I\t\tgenerate code for inetd support in server\n"
      "-K seconds\tserver exits after K seconds of inactivity (-1: never)\n"
      "-l\t\tgenerate client side stubs\n"
      "-L\t\tserver errors will be printed to syslog\n"
      "-m\t\tgenerate server side stubs (no main)\n"
      "-M\t\tgenerate MT-safe code\n"
      "-N\t\tsupports multiple arguments and call-by-value\n"
      "-o outfile\tname of the output file\n"
      "-s nettype\tgenerate server code that supports named nettype (udp, tcp, netpath, via...)\n"
      "-Sc\t\tgenerate sample client code that uses remote procedures\n"
      "-Ss\t\tgenerate sample server code that defines remote procedures\n"
      "-Sm\t\tgenerate makefile template\n"
      "-Y path\t\tdirectory name to find C preprocessor (cpp)\n"
      "--help\t\tgive this help list\n"
      "--version\tprint program version\n");
}

namespace {

bool SetSingle(Options* o, OutputKind kind, std::string* error) {
  if (o->single && o->kind != kind) {
    *error = "cannot have more than one file generation flag";
    return false;
  }
  o->single = true;
  o->kind = kind;
  return true;
}

// The file a one-file flag (-c, -h, -l, -m) asks for.
OutputKind SingleFileKind(char flag) {
  switch (flag) {
    case 'c':
      return OutputKind::kXdr;
    case 'h':
      return OutputKind::kHeader;
    case 'l':
      return OutputKind::kClient;
    default:
      return OutputKind::kServerNoMain;  // 'm'
  }
}

}  // namespace

bool ParseOptions(int argc, const char* const* argv, Options* o, std::string* error) {
  *o = Options{};
  bool s_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") {
      o->help = true;
      return true;
    }
    if (arg == "--version") {
      o->version = true;
      return true;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (!o->infile.empty()) {
        *error = Cat("more than one input file ('", o->infile, "' and '", arg, "')");
        return false;
      }
      o->infile = arg;
      continue;
    }
    for (size_t j = 1; j < arg.size(); ++j) {
      const char f = arg[j];
      // Options with a value take the rest of this word, or the next word.
      auto value = [&](const char* what, std::string* out) {
        if (j + 1 < arg.size()) {
          *out = arg.substr(j + 1);
        } else if (i + 1 < argc) {
          *out = argv[++i];
        } else {
          *error = Cat("option -", std::string(1, f), " needs ", what);
          return false;
        }
        j = arg.size();
        return true;
      };
      std::string v;
      switch (f) {
        case 'a':
          o->samples = true;
          break;
        case 'C':
          break;  // ANSI C is the only mode
        case 'M':
          o->mt_safe = true;
          break;
        case 'N':
          o->newstyle = true;
          break;
        case 'I':
          o->inetd = true;
          break;
        case 'L':
          o->syslog_errors = true;
          break;
        case 'c':
        case 'h':
        case 'l':
        case 'm':
          if (!SetSingle(o, SingleFileKind(f), error)) return false;
          break;
        case 'S': {
          if (j + 1 >= arg.size()) {
            *error = "option -S needs c, s or m (-Sc, -Ss, -Sm)";
            return false;
          }
          const char w = arg[++j];
          const OutputKind k = w == 'c'   ? OutputKind::kSampleClient
                               : w == 's' ? OutputKind::kSampleServer
                               : w == 'm' ? OutputKind::kMakefile
                                          : OutputKind::kHeader;
          if (w != 'c' && w != 's' && w != 'm') {
            *error = Cat("unknown option -S", std::string(1, w), " (use -Sc, -Ss or -Sm)");
            return false;
          }
          if (!SetSingle(o, k, error)) return false;
          break;
        }
        case 's':
          if (!value("a nettype", &v)) return false;
          if (v.empty()) {
            *error = "option -s needs a nettype";
            return false;
          }
          o->nettypes.push_back(v);
          s_given = true;
          break;
        case 'o':
          if (!value("a file name", &o->outfile)) return false;
          break;
        case 'D':
          if (!value("a name", &v)) return false;
          if (v.empty() || v[0] == '=') {
            *error = "option -D needs a name";
            return false;
          }
          o->defines.push_back(v);
          break;
        case 'Y':
          if (!value("a directory", &o->cpp_dir)) return false;
          break;
        case 'i':
          if (!value("a size", &v)) return false;
          break;
        case 'K': {
          if (!value("a number of seconds", &v)) return false;
          errno = 0;
          char* end = nullptr;
          const long k = std::strtol(v.c_str(), &end, 10);
          if (errno != 0 || end == v.c_str() || *end != '\0' || k < -1 || k > 1000000) {
            *error = Cat("option -K needs a number of seconds (or -1), not '", v, "'");
            return false;
          }
          o->closedown_seconds = static_cast<int>(k);
          break;
        }
        case 't':
        case 'T':
          *error = "dispatch tables (-t, -T) are not supported by rpcgen_via";
          return false;
        case 'n':
          *error = "-n netid is not supported by rpcgen_via; use -s nettype";
          return false;
        case 'b':
        case '5':
          *error = Cat("-", std::string(1, f),
                       " (SunOS 4.1 / SysVr4 compatibility) is not supported by rpcgen_via");
          return false;
        default:
          *error = Cat("unknown option -", std::string(1, f), " (see --help)");
          return false;
      }
    }
  }
  // o->single so far means a one-file flag (-c/-h/-l/-m/-S?): -s then only names the nettypes.
  if (s_given && !o->single && !o->samples) {
    // `rpcgen -s nettype infile`: the server file alone.
    o->single = true;
    o->kind = OutputKind::kServer;
  }
  if (!o->single) {
    o->all_files = true;
    if (o->infile.empty()) {
      *error = "an input file is needed unless one of -c -h -l -m -s -Sc -Ss -Sm is given";
      return false;
    }
    if (!o->outfile.empty()) {
      *error = "-o needs one of -c -h -l -m -s -Sc -Ss -Sm (several files are generated otherwise)";
      return false;
    }
  } else if (o->samples) {
    *error = "-a generates every file; it cannot be combined with a single-file flag";
    return false;
  }
  if (o->infile.size() < 2 || o->infile.compare(o->infile.size() - 2, 2, ".x") != 0) {
    if (!o->infile.empty()) {
      *error = Cat("input file '", o->infile, "' must end in .x");
      return false;
    }
  }
  return true;
}

}  // namespace san::rpcgen
