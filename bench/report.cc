#include "report.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "options.h"

namespace san::bench {
namespace {

// Columns of the figures, in order.
const std::vector<std::string>& TransportColumns(Kind kind) {
  static const std::vector<std::string> kLatency = {"raw-shm", "sanlib", "tcp", "unix"};
  static const std::vector<std::string> kBandwidth = {"raw-shm", "sanlib", "sanlib-combine",
                                                      "tcp",     "tcp-nodelay", "unix"};
  return kind == Kind::kLatency ? kLatency : kBandwidth;
}

const Row* Find(const std::vector<Row>& rows, const std::string& transport, Mode mode,
                uint32_t size) {
  for (const Row& r : rows) {
    if (r.transport == transport && r.mode == mode && r.size == size) return &r;
  }
  return nullptr;
}

std::string Fmt(const char* format, double v) {
  char buf[32];
  snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Figure(double v) {
  if (!std::isfinite(v)) return "-";
  if (v < 10) return Fmt("%.3f", v);
  if (v < 100) return Fmt("%.2f", v);
  return Fmt("%.1f", v);
}

std::string Ratio(double num, double den) {
  if (!std::isfinite(num) || !std::isfinite(den) || den <= 0) return "-";
  const double r = num / den;
  return r < 10 ? Fmt("%.2fx", r) : Fmt("%.1fx", r);
}

std::string Difference(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return "-";
  return Fmt("%+.3f", a - b);
}

void PrintRow(FILE* out, const std::vector<std::string>& cells) {
  fprintf(out, "%9s", cells[0].c_str());
  for (size_t i = 1; i < cells.size(); ++i) fprintf(out, " %9s", cells[i].c_str());
  fputc('\n', out);
}

void PrintLatency(FILE* out, const ReportInfo& info, const std::vector<Row>& rows, Mode mode) {
  auto value = [&](const char* t, uint32_t size, bool p99) {
    const Row* r = Find(rows, t, mode, size);
    return r ? (p99 ? r->p99_us : r->value) : NAN;
  };
  fprintf(out, "\n== latency, %s mode: one-way µs (RTT/2), median of 8 chunk means ==\n",
          ModeName(mode));
  PrintRow(out, {"size", "raw-shm", "sanlib", "tcp", "unix", "tcp/san", "unix/san", "san/raw",
                 "san-raw"});
  for (uint32_t size : info.sizes) {
    const double raw = value("raw-shm", size, false), san = value("sanlib", size, false);
    const double tcp = value("tcp", size, false), unx = value("unix", size, false);
    PrintRow(out, {SizeLabel(size), Figure(raw), Figure(san), Figure(tcp), Figure(unx),
                   Ratio(tcp, san), Ratio(unx, san), Ratio(san, raw), Difference(san, raw)});
  }
  fprintf(out, "-- p99 one-way µs (every %llu-th round trip timed) --\n",
          static_cast<unsigned long long>(PingPongResult::kSampleEvery));
  PrintRow(out, {"size", "raw-shm", "sanlib", "tcp", "unix"});
  for (uint32_t size : info.sizes) {
    PrintRow(out, {SizeLabel(size), Figure(value("raw-shm", size, true)),
                   Figure(value("sanlib", size, true)), Figure(value("tcp", size, true)),
                   Figure(value("unix", size, true))});
  }
}

void PrintBandwidth(FILE* out, const ReportInfo& info, const std::vector<Row>& rows, Mode mode) {
  auto value = [&](const char* t, uint32_t size) {
    const Row* r = Find(rows, t, mode, size);
    return r ? r->value : NAN;
  };
  fprintf(out,
          "\n== bandwidth, %s mode: GB/s (10^9 bytes/s) at the receiver, median of 8 chunks ==\n",
          ModeName(mode));
  PrintRow(out, {"size", "raw-shm", "sanlib", "san+comb", "tcp", "tcp-nd", "unix", "san/tcpnd",
                 "comb/tcp", "san/unix", "san/raw"});
  for (uint32_t size : info.sizes) {
    const double raw = value("raw-shm", size), san = value("sanlib", size);
    const double comb = value("sanlib-combine", size), tcp = value("tcp", size);
    const double tcp_nd = value("tcp-nodelay", size), unx = value("unix", size);
    PrintRow(out, {SizeLabel(size), Figure(raw), Figure(san), Figure(comb), Figure(tcp),
                   Figure(tcp_nd), Figure(unx), Ratio(san, tcp_nd), Ratio(comb, tcp),
                   Ratio(san, unx), Ratio(san, raw)});
  }
}

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  return Fmt("%.6g", v);
}

Status WriteFile(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return Status::FromErrno("fopen");
  const bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  if (fclose(f) != 0 || !ok) return Status::FromErrno("write");
  return Status::Ok();
}

bool OnPath(const char* program) {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(start, end - start) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// A gnuplot double-quoted string: \n stays a line break, quotes and backslashes are escaped.
std::string DoubleQuote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '\n') {
      q += "\\n";
    } else {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
  }
  return q + "\"";
}

const char* Colour(const std::string& transport) {
  if (transport == "raw-shm") return "#1b9e77";
  if (transport == "sanlib") return "#d95f02";
  if (transport == "sanlib-combine") return "#e7298a";
  if (transport == "tcp") return "#7570b3";
  if (transport == "tcp-nodelay") return "#e6ab02";
  return "#66a61e";
}

}  // namespace

void PrintReport(FILE* out, const ReportInfo& info, const std::vector<Row>& rows) {
  for (const std::string& line : info.header) fprintf(out, "%s\n", line.c_str());
  for (Mode mode : info.modes) {
    if (info.kind == Kind::kLatency) {
      PrintLatency(out, info, rows, mode);
    } else {
      PrintBandwidth(out, info, rows, mode);
    }
  }
  fputc('\n', out);
  if (info.kind == Kind::kLatency) {
    fprintf(out,
            "tcp/san, unix/san: kernel latency / sanlib latency (>1: sanlib is faster). "
            "san/raw: sanlib / raw-shm;\nsan-raw: µs the socket layer adds to the raw provider. "
            "'-': not run or failed.\n");
  } else {
    fprintf(out,
            "sanlib: TCP_NODELAY (every send its own packet); san+comb: sanlib with default "
            "combining; tcp: Nagle on; tcp-nd: TCP_NODELAY.\nsan/tcpnd (like against like: both "
            "NODELAY), comb/tcp (both coalescing), san/unix: sanlib / kernel (>1: sanlib is "
            "faster). san/raw: sanlib / raw-shm. '-': not run or failed.\n");
  }
}

Status WriteJson(const std::string& path, const std::vector<Row>& rows) {
  std::string s = "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    s += "  {\"transport\": \"" + r.transport + "\", \"mode\": \"" + ModeName(r.mode) +
         "\", \"size\": " + std::to_string(r.size);
    if (r.kind == Kind::kLatency) {
      s += ", \"one_way_us\": " + Number(r.value) + ", \"p99_us\": " + Number(r.p99_us);
    } else {
      s += ", \"gbytes_per_s\": " + Number(r.value);
    }
    s += ", \"cpu_us_per_op\": " + Number(r.cpu_us) + "}";
    s += i + 1 < rows.size() ? ",\n" : "\n";
  }
  s += "]\n";
  return WriteFile(path, s);
}

Status WriteCsv(const std::string& path, const std::vector<Row>& rows) {
  const bool latency = rows.empty() || rows[0].kind == Kind::kLatency;
  std::string s =
      latency ? "transport,mode,size,one_way_us,p99_us,cpu_us_per_op\n"
              : "transport,mode,size,gbytes_per_s,cpu_us_per_op\n";
  for (const Row& r : rows) {
    s +=
        r.transport + "," + ModeName(r.mode) + "," + std::to_string(r.size) + "," + Number(r.value);
    if (latency) {
      s += ',';
      if (std::isfinite(r.p99_us)) s += Number(r.p99_us);
    }
    s += ',';
    if (std::isfinite(r.cpu_us)) s += Number(r.cpu_us);
    s += "\n";
  }
  return WriteFile(path, s);
}

bool WritePlot(const std::string& path, const ReportInfo& info, const std::vector<Row>& rows,
               std::string* message) {
  if (!OnPath("gnuplot")) {
    *message =
        "gnuplot not found: no plot drawn (apt-get install gnuplot-nox); the rows are "
        "still in the table";
    return false;
  }
  const bool latency = info.kind == Kind::kLatency;
  std::string script;
  script +=
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo size 1100,700 enhanced font ',10'\n"
      "} else {\n"
      "  set terminal png size 1100,700\n"
      "}\n";
  script += "set output " + Quote(path) + "\n";
  std::string title = latency ? "san-bench: one-way latency (RTT/2)" : "san-bench: bandwidth";
  if (info.header.size() > 1) title += "\n" + info.header[1];
  script += "set title " + DoubleQuote(title) + " noenhanced\n";
  script += "set logscale x 2\nset grid\nset key outside right top\n";
  script += "set xlabel 'message size (bytes)'\n";
  script += latency ? "set logscale y 10\nset ylabel 'one-way latency (µs)'\n"
                    : "set ylabel 'GB/s (10^9 bytes/s)'\nset yrange [0:*]\n";
  if (!info.sizes.empty()) {
    const auto [lo, hi] = std::minmax_element(info.sizes.begin(), info.sizes.end());
    script += "set xrange [" + Number(*lo / 1.5) + ":" + Number(*hi * 1.5) + "]\n";
  }
  script += "set xtics (";
  for (size_t i = 0; i < info.sizes.size(); ++i) {
    script +=
        (i ? ", " : "") + Quote(SizeLabel(info.sizes[i])) + " " + std::to_string(info.sizes[i]);
  }
  script += ")\n";
  std::string plot;
  int block = 0;
  for (Mode mode : info.modes) {
    for (const std::string& t : TransportColumns(info.kind)) {
      std::string data;
      for (uint32_t size : info.sizes) {
        const Row* r = Find(rows, t, mode, size);
        if (r && std::isfinite(r->value) && r->value > 0) {
          data += std::to_string(size) + " " + Number(r->value) + "\n";
        }
      }
      if (data.empty()) continue;
      const std::string name = "$d" + std::to_string(block++);
      script += name + " << EOD\n" + data + "EOD\n";
      plot += std::string(plot.empty() ? "plot " : ", \\\n     ") + name +
              " using 1:2 with linespoints lw 2 pt 7 ps 0.7 dt " +
              (mode == Mode::kSpin ? "1" : "2") + " lc rgb '" + Colour(t) + "' title " +
              Quote(t + " " + ModeName(mode));
    }
  }
  if (plot.empty()) {
    *message = "nothing to plot";
    return false;
  }
  script += plot + "\n";

  char script_path[] = "/tmp/san-bench-plot-XXXXXX";
  const int fd = mkstemp(script_path);
  if (fd < 0) {
    *message = std::string("mkstemp: ") + strerror(errno);
    return false;
  }
  const bool written = write(fd, script.data(), script.size()) == ssize_t(script.size());
  close(fd);
  int status = -1;
  if (written) {
    const std::string command = "gnuplot " + std::string(script_path) + " 2>&1";
    fflush(stdout);
    fflush(stderr);
    status = system(command.c_str());
  }
  unlink(script_path);
  struct stat st;
  if (status != 0 || stat(path.c_str(), &st) != 0 || st.st_size == 0) {
    *message = "gnuplot did not draw " + path + " (status " + std::to_string(status) + ")";
    return false;
  }
  return true;
}

}  // namespace san::bench
