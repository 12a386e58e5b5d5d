#include "process.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace san::drpc::testing {

using Clock = std::chrono::steady_clock;

std::string DrpcPath() { return DRPC_BIN; }
std::string DrpcdPath() { return DRPCD_BIN; }

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/drpc-test-XXXXXX";
  if (mkdtemp(tmpl.data())) path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  // Directories a test made unreadable would stop remove_all: give them back first.
  for (auto it = std::filesystem::recursive_directory_iterator(
           path_, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) chmod(it->path().c_str(), 0700);
  }
  std::filesystem::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& data, int mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  chmod(path.c_str(), static_cast<mode_t>(mode));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

bool Daemon::Start(const std::string& dir, const std::string& listen_host,
                   const std::vector<std::string>& args, const std::vector<std::string>& env) {
  static int serial = 0;
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(++serial);
  const std::string port_file = dir + "/port-" + tag;
  log_ = dir + "/drpcd-" + tag + ".log";
  std::vector<std::string> argv = {DrpcdPath(), "--listen", listen_host + ":0", "--port-file",
                                   port_file};
  argv.insert(argv.end(), args.begin(), args.end());
  testing_support::ProgramSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.stdin_path = "/dev/null";
  spec.stdout_path = dir + "/drpcd-" + tag + ".out";
  spec.stderr_path = log_;
  spec.stop_signal = SIGTERM;
  spec.stop_timeout_ms = 10000;
  if (!program_.Start(spec)) return false;
  const Clock::time_point end = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < end) {
    const std::string text = ReadFile(port_file);
    if (!text.empty() && text.back() == '\n') {
      port_ = atoi(text.c_str());
      return port_ > 0;
    }
    if (program_.Exited()) return false;  // a start-up error (in the log)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill();
  return false;
}

int Daemon::Stop() {
  if (!program_.running()) return -1;
  const int code = program_.Stop(SIGTERM, 10000);
  return code == -1 ? 999 : code;
}

}  // namespace san::drpc::testing
