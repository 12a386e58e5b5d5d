// sanrun: runs a program with sanlib's compatibility layer preloaded, like smc_run / rsocket's
// preload: `sanrun [options] -- program args...`. Options set SAN_* variables for the program;
// `--help` lists every setting the library reads, with its default.
#include <limits.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "sanlib/common/config.h"
#include "sanlib/common/config_file.h"

namespace po = boost::program_options;

namespace {

// libsan_preload.so of this sanrun's own tree, found relative to it wherever that tree was
// installed or staged (<bindir>/sanrun and <libdir>/libsan_preload.so; build/<preset>/bin and
// build/<preset>/lib alike), then in the library directory it was configured to install to.
std::string PreloadPath() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "libsan_preload.so";  // let the dynamic linker search for it
  self[n] = '\0';
  std::string dir(self);
  dir.erase(dir.rfind('/'));
  const std::string candidates[] = {dir + "/" SAN_PRELOAD_FROM_BINDIR "/libsan_preload.so",
                                    dir + "/../lib/libsan_preload.so", dir + "/libsan_preload.so",
                                    SAN_PRELOAD_INSTALLED_DIR "/libsan_preload.so"};
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) {
      char real[PATH_MAX];
      return realpath(c.c_str(), real) ? std::string(real) : c;
    }
  }
  return "libsan_preload.so";
}

// sanrun's own default for SAN_SETUP is late (docs/sockets.md "Connection set-up"): nothing tells
// it how long an unmodified program's connections live, and under late a short one costs what a
// kernel connection costs while a long one still moves to shm. Programs written for sanlib keep
// the library's default, eager. The environment (and --set) and the settings file still decide.
void DefaultToLateSetup() {
  if (getenv("SAN_SETUP")) return;
  std::vector<std::string> unused;  // the program's own configuration reports what is wrong
  const san::ConfigFile file = san::ReadConfigFile(
      san::ConfigFilePath([](const char* name) -> const char* { return getenv(name); }), &unused);
  for (const san::ConfigFileLine& line : file.settings) {
    if (line.name == "SAN_SETUP") return;
  }
  setenv("SAN_SETUP", "late", 1);
}

void PrintHelp(const po::options_description& options) {
  std::cout << "usage: sanrun [options] [--] program [args...]\n\n"
               "Runs program with sanlib preloaded: its TCP sockets to and from other sanlib\n"
               "programs on this host move data over shared memory; any other peer gets plain\n"
               "TCP. `sanstat` shows which sockets were accelerated and why others were not.\n\n"
            << options
            << "\nSettings (environment variables; the options above set some of them):\n";
  for (const san::SettingInfo& s : san::Settings()) {
    // sanrun's own default differs from the library's (DefaultToLateSetup).
    const bool ours = std::strcmp(s.variable, "SAN_SETUP") == 0;
    std::printf("  %-20s default %-8s %s\n", s.variable,
                ours               ? "late"
                : *s.default_value ? s.default_value
                                   : "(none)",
                s.meaning);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Our options end at "--" or at the first word that is not an option (the program).
  int split = 1;
  while (split < argc && argv[split][0] == '-' && std::string(argv[split]) != "--") {
    const std::string word = argv[split];
    const bool takes_value = word.find('=') == std::string::npos && word != "--help" &&
                             word != "-h" && word != "--verbose" && word != "-v";
    split += takes_value ? 2 : 1;
  }
  if (split > argc) split = argc;
  po::options_description options("Options");
  std::vector<std::string> sets;
  options.add_options()("help,h", "print this help and every SAN_* setting")(
      "verbose,v", "print the preload and settings before running the program")(
      "provider", po::value<std::string>(), "SAN_PROVIDER: auto|shm|verbs|off")(
      "rules", po::value<std::string>(), "SAN_RULES: which sockets become SAN sockets")(
      "rules-file", po::value<std::string>(), "SAN_RULES_FILE: a file of rules")(
      "log", po::value<std::string>(), "SAN_LOG: error|warn|info|debug")(
      "set", po::value<std::vector<std::string>>(&sets),
      "VAR=VALUE: any SAN_* setting (repeatable)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(split, argv, options), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "sanrun: " << e.what() << "\n(sanrun --help for usage)\n";
    return 2;
  }
  if (vm.count("help")) {
    PrintHelp(options);
    return 0;
  }
  int first = split < argc && std::string(argv[split]) == "--" ? split + 1 : split;
  if (first >= argc) {
    std::cerr << "sanrun: no program to run (sanrun --help for usage)\n";
    return 2;
  }
  const struct {
    const char* option;
    const char* variable;
  } kNamed[] = {{"provider", "SAN_PROVIDER"},
                {"rules", "SAN_RULES"},
                {"rules-file", "SAN_RULES_FILE"},
                {"log", "SAN_LOG"}};
  for (const auto& n : kNamed) {
    if (vm.count(n.option)) setenv(n.variable, vm[n.option].as<std::string>().c_str(), 1);
  }
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || s.compare(0, 4, "SAN_") != 0) {
      std::cerr << "sanrun: --set takes SAN_VARIABLE=value, not '" << s << "'\n";
      return 2;
    }
    setenv(s.substr(0, eq).c_str(), s.substr(eq + 1).c_str(), 1);
  }
  DefaultToLateSetup();
  std::string preload = PreloadPath();
  if (const char* existing = getenv("LD_PRELOAD"); existing && *existing) {
    preload.append(":").append(existing);
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  if (vm.count("verbose")) {
    std::cerr << "sanrun: LD_PRELOAD=" << preload << "\n";
    for (const san::SettingInfo& s : san::Settings()) {
      if (const char* v = getenv(s.variable))
        std::cerr << "sanrun: " << s.variable << "=" << v << "\n";
    }
  }
  execvp(argv[first], argv + first);
  std::cerr << "sanrun: cannot run " << argv[first] << ": " << strerror(errno) << "\n";
  return errno == ENOENT ? 127 : 126;
}
