#include "options.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace san::bench {
namespace {

constexpr uint32_t kMaxSize = 1u << 20;  // the shm provider's largest message

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// "4096", "4k", "4K", "4KiB", "1M", "1MiB"
bool ParseSize(const std::string& text, uint32_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return false;
  uint64_t multiplier = 1;
  const std::string suffix = end;
  if (suffix == "k" || suffix == "K" || suffix == "KiB" || suffix == "KB") {
    multiplier = 1024;
  } else if (suffix == "m" || suffix == "M" || suffix == "MiB" || suffix == "MB") {
    multiplier = 1024 * 1024;
  } else if (!suffix.empty() && suffix != "B") {
    return false;
  }
  const uint64_t size = v * multiplier;
  if (size == 0 || size > kMaxSize) return false;
  *out = static_cast<uint32_t>(size);
  return true;
}

bool ParsePositive(const std::string& text, double* out) {
  char* end = nullptr;
  const double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v > 0)) return false;
  *out = v;
  return true;
}

}  // namespace

std::vector<uint32_t> DefaultSizes(Kind kind) {
  std::vector<uint32_t> sizes;
  const uint32_t max = kind == Kind::kLatency ? 64u << 10 : 1u << 20;
  for (uint32_t s = 4; s <= max; s *= 4) sizes.push_back(s);
  return sizes;
}

std::string SizeLabel(uint32_t size) {
  if (size >= (1u << 20) && size % (1u << 20) == 0) return std::to_string(size >> 20) + " MiB";
  if (size >= 1024 && size % 1024 == 0) return std::to_string(size >> 10) + " KiB";
  return std::to_string(size) + " B";
}

const char* UsageText() {
  return R"(usage: san-bench latency|bandwidth [options]

  latency     ping-pong; one-way latency = round trip / 2 (default sizes 4 B .. 64 KiB)
  bandwidth   one-way streaming; GB/s (10^9 bytes/s) timed by the receiver
              (default sizes 4 B .. 1 MiB)

Each row runs in two fresh processes pinned to two CPUs, for every transport:
  raw-shm         the shm fabric provider driven directly (the "native VIA" line)
  sanlib          SAN sockets through <san/san.h> (TCP_NODELAY: no combining)
  sanlib-combine  bandwidth only: SAN sockets with default combining (added with sanlib)
  tcp             kernel TCP over loopback (TCP_NODELAY for latency, Nagle on for bandwidth)
  tcp-nodelay     bandwidth only: kernel TCP with TCP_NODELAY, sanlib's like (added with tcp)
  unix            kernel Unix stream sockets

options:
  --sizes LIST        message sizes, e.g. 4,1K,64K (suffixes K and M are powers of 1024;
                      at most 1 MiB)
  --iters N           measure exactly N round trips / messages per point (after N/10 warm-up)
  --seconds S         measure about S seconds per point instead (default 0.4)
  --transports LIST   subset of raw-shm,sanlib,tcp,unix (and sanlib-combine, tcp-nodelay);
                      default all
  --mode spin|block|both
                      spin: busy-poll (SAN_SPIN_US=10000000, kernel sockets MSG_DONTWAIT loops);
                      block: sleep (SAN_SPIN_US=0, blocking calls, raw shm on its doorbell);
                      default both
  --json FILE         write the rows as a JSON list
  --csv FILE          write the rows as CSV
  --plot FILE.png     draw the curves with gnuplot (gnuplot-nox)
  --timeout S         a run that makes no progress for S seconds is killed and reported as
                      hung (default 60)
  --host ADDR         the IPv4 address of this host the connections use (default 127.0.0.1);
                      with SAN_PROVIDER=verbs and an RDMA port's address, sanlib runs over verbs
  -h, --help          this text

Exit status: 0 when every point was measured and its data verified; 1 on a real error (data
corruption, a connection that fails or falls back to TCP, a hung run); 2 on a usage error.
)";
}

bool ParseOptions(int argc, char** argv, Options* o, bool* help, std::string* error) {
  *help = false;
  if (argc < 2) {
    *error = "a subcommand is required: latency or bandwidth";
    return false;
  }
  const std::string command = argv[1];
  if (command == "-h" || command == "--help") {
    *help = true;
    return true;
  }
  if (command == "latency") {
    o->kind = Kind::kLatency;
  } else if (command == "bandwidth") {
    o->kind = Kind::kBandwidth;
  } else {
    *error = "unknown subcommand '" + command + "' (latency or bandwidth)";
    return false;
  }
  bool have_iters = false, have_seconds = false;
  std::string mode = "both";
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return true;
    }
    static const char* const kWithValue[] = {"--sizes",   "--iters", "--seconds", "--transports",
                                             "--mode",    "--json",  "--csv",     "--plot",
                                             "--timeout", "--host"};
    bool known = false;
    for (const char* name : kWithValue) known = known || arg == name;
    if (!known) {
      *error = "unknown option '" + arg + "'";
      return false;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        *error = arg + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (arg == "--sizes") {
      o->sizes.clear();
      for (const std::string& s : SplitList(value)) {
        uint32_t size;
        if (!ParseSize(s, &size)) {
          *error = "bad size '" + s + "' (1 B .. 1 MiB)";
          return false;
        }
        o->sizes.push_back(size);
      }
      if (o->sizes.empty()) {
        *error = "--sizes: empty list";
        return false;
      }
    } else if (arg == "--iters") {
      char* end = nullptr;
      const unsigned long long n = strtoull(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || n == 0) {
        *error = "bad --iters '" + value + "'";
        return false;
      }
      o->schedule.iters = n;
      have_iters = true;
    } else if (arg == "--seconds") {
      if (!ParsePositive(value, &o->schedule.seconds)) {
        *error = "bad --seconds '" + value + "'";
        return false;
      }
      have_seconds = true;
    } else if (arg == "--transports") {
      o->transports.clear();
      for (const std::string& t : SplitList(value)) {
        if (t != "raw-shm" && t != "sanlib" && t != "sanlib-combine" && t != "tcp" &&
            t != "tcp-nodelay" && t != "unix") {
          *error = "unknown transport '" + t +
                   "' (raw-shm, sanlib, sanlib-combine, tcp, tcp-nodelay, unix)";
          return false;
        }
        o->transports.push_back(t);
      }
    } else if (arg == "--mode") {
      mode = value;
    } else if (arg == "--json") {
      o->json_path = value;
    } else if (arg == "--csv") {
      o->csv_path = value;
    } else if (arg == "--plot") {
      o->plot_path = value;
    } else if (arg == "--host") {
      in_addr a;
      if (inet_pton(AF_INET, value.c_str(), &a) != 1) {
        *error = "bad --host '" + value + "' (an IPv4 address of this host)";
        return false;
      }
      o->host = value;
    } else if (arg == "--timeout") {
      if (!ParsePositive(value, &o->stall_timeout_s)) {
        *error = "bad --timeout '" + value + "'";
        return false;
      }
    }
  }
  if (have_iters && have_seconds) {
    *error = "give --iters or --seconds, not both";
    return false;
  }
  if (mode == "spin") {
    o->modes = {Mode::kSpin};
  } else if (mode == "block") {
    o->modes = {Mode::kBlock};
  } else if (mode == "both") {
    o->modes = {Mode::kSpin, Mode::kBlock};
  } else {
    *error = "bad --mode '" + mode + "' (spin, block or both)";
    return false;
  }
  if (o->sizes.empty()) o->sizes = DefaultSizes(o->kind);
  if (o->transports.empty()) o->transports = {"raw-shm", "sanlib", "tcp", "unix"};
  return true;
}

}  // namespace san::bench
