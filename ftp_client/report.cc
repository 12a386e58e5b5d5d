#include "ftp_client/report.h"

#include <unistd.h>

#include <chrono>

namespace san::ftp {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string FormatStats(const TransferStats& s) {
  const double secs = s.seconds > 0 ? s.seconds : 1e-9;
  char buf[128];
  snprintf(buf, sizeof buf, "%llu bytes in %.6f s (%.2f MB/s)",
           static_cast<unsigned long long>(s.bytes), s.seconds,
           static_cast<double>(s.bytes) / secs / 1e6);
  return buf;
}

Progress::Progress(FILE* out, uint64_t total, bool hash, bool bar)
    : out_(out), total_(total), hash_(hash), bar_(bar && isatty(fileno(out))), start_(Now()) {}

void Progress::Update(uint64_t bytes) {
  if (hash_) {
    for (; hashes_ < bytes / 1024; ++hashes_) fputc('#', out_);
    fflush(out_);
    return;
  }
  if (!bar_) return;
  const double now = Now();
  if (now - start_ < 1.0 || now - last_draw_ < 0.2) return;
  last_draw_ = now;
  const double rate = static_cast<double>(bytes) / (now - start_) / 1e6;
  if (total_ > 0) {
    const int width = 40;
    const int filled = static_cast<int>(static_cast<double>(width) * static_cast<double>(bytes) /
                                        static_cast<double>(total_));
    fprintf(out_, "\r[%-*.*s] %3d%% %.1f MB/s", width, filled > width ? width : filled,
            "########################################",
            static_cast<int>(100.0 * static_cast<double>(bytes) / static_cast<double>(total_)),
            rate);
  } else {
    fprintf(out_, "\r%llu bytes %.1f MB/s", static_cast<unsigned long long>(bytes), rate);
  }
  fflush(out_);
  drawn_ = true;
}

void Progress::Done() {
  if (hash_ && hashes_ > 0) fputc('\n', out_);
  if (drawn_) fputc('\n', out_);
  fflush(out_);
}

}  // namespace san::ftp
