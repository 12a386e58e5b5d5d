#include "ftpd/server/xferlog.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <ctime>

namespace san::ftp {

bool XferLog::Open(const std::string& path) {
  if (path.empty()) return true;
  fd_.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640));
  return fd_.valid();
}

std::string FormatTransferRecord(const TransferRecord& r, long now) {
  const time_t t = static_cast<time_t>(now);
  tm tmv{};
  localtime_r(&t, &tmv);
  char when[64];
  strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", &tmv);
  std::string path = r.path;
  for (char& c : path) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') c = '_';
  }
  std::string line = when;
  line.append(" ").append(std::to_string(static_cast<long>(std::ceil(r.seconds))));
  line.append(" ").append(r.remote_host);
  line.append(" ").append(std::to_string(r.bytes));
  line.append(" ").append(path);
  line.append(r.binary ? " b _ " : " a _ ");
  line.append(r.incoming ? "i " : "o ");
  line.append(r.anonymous ? "a " : "r ");
  line.append(r.user.empty() ? "-" : r.user);
  line.append(" ftp 0 * ");
  line.append(r.complete ? "c\n" : "i\n");
  return line;
}

void XferLog::Record(const TransferRecord& r) const {
  if (!fd_.valid()) return;
  const std::string line = FormatTransferRecord(r, static_cast<long>(time(nullptr)));
  ssize_t ignored = ::write(fd_.get(), line.data(), line.size());
  (void)ignored;  // a full disk must not stop the transfer it describes
}

}  // namespace san::ftp
