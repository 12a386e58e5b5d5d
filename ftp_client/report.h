// What ftp_client prints about transfers: the "N bytes in S s (X MB/s)" line after each one, and
// while it runs either netkit-style hash marks or, on a terminal, a progress bar.
// Thread-safety: one Progress per transfer, used by the transferring thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "ftp_client/client.h"

namespace san::ftp {

// "1234 bytes in 0.012 s (102.83 MB/s)" (MB = 10^6 bytes).
std::string FormatStats(const TransferStats& s);

class Progress {
 public:
  // total: expected bytes (0 if unknown); hash: print '#' per 1024 bytes; bar: progress bar
  // (only drawn when out is a terminal and the transfer lasts over a second).
  Progress(FILE* out, uint64_t total, bool hash, bool bar);
  void Update(uint64_t bytes);
  void Done();

 private:
  FILE* out_;
  uint64_t total_;
  bool hash_;
  bool bar_;
  uint64_t hashes_ = 0;
  double start_;
  double last_draw_ = 0;
  bool drawn_ = false;
};

}  // namespace san::ftp
