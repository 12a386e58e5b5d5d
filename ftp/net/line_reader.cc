#include "ftp/net/line_reader.h"

#include <cerrno>

namespace san::ftp {

LineReader::Outcome LineReader::Next(int timeout_ms, std::string* line, bool exact) {
  while (true) {
    const size_t lf = buffer_.find('\n');
    if (lf != std::string::npos) {
      if (discarding_) {
        discarding_ = false;
        buffer_.erase(0, lf + 1);
        continue;
      }
      size_t end = lf;
      if (end > 0 && buffer_[end - 1] == '\r') --end;
      if (end > max_line_) {
        buffer_.erase(0, lf + 1);
        return Outcome::kTooLong;
      }
      line->assign(buffer_, 0, end);
      buffer_.erase(0, lf + 1);
      return Outcome::kLine;
    }
    if (discarding_) {
      buffer_.clear();
    } else if (buffer_.size() > max_line_ + 1) {
      buffer_.clear();
      discarding_ = true;
      return Outcome::kTooLong;
    }
    char chunk[4096];
    Result<size_t> got = socket_.Recv(chunk, exact ? 1 : sizeof chunk, timeout_ms);
    if (!got.ok()) {
      return got.status().code() == ETIMEDOUT ? Outcome::kTimeout : Outcome::kError;
    }
    if (*got == 0) return Outcome::kEof;
    buffer_.append(chunk, *got);
  }
}

}  // namespace san::ftp
