// The transfer log, in the xferlog(5) format wu-ftpd, ProFTPD and vsftpd write, so existing log
// tools read it:
//   Mon Nov 23 01:14:08 2026 1 127.0.0.1 1234 /dir/file b _ o r alice ftp 0 * c
// The file is opened O_APPEND before sessions fork; each record is one write(2), so records of
// concurrent sessions never interleave. Thread-safety: Record may be called from any process.
#pragma once

#include <cstdint>
#include <string>

#include "sanlib/common/unique_fd.h"

namespace san::ftp {

struct TransferRecord {
  double seconds = 0;
  std::string remote_host;
  uint64_t bytes = 0;
  std::string path;  // virtual path; spaces become '_' as in wu-ftpd
  bool binary = true;
  bool incoming = false;  // STOR/APPE/STOU
  bool anonymous = false;
  std::string user;
  bool complete = true;
};

class XferLog {
 public:
  XferLog() = default;
  // Opens (creates) path for appending; "" leaves the log disabled.
  bool Open(const std::string& path);
  void Record(const TransferRecord& r) const;
  bool enabled() const { return fd_.valid(); }

 private:
  UniqueFd fd_;
};

// The record's line, with its newline (pure; unit-tested).
std::string FormatTransferRecord(const TransferRecord& r, long now);

}  // namespace san::ftp
