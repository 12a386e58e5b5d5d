// TYPE A (RFC 959 3.1.1.1): the wire carries lines ended by CRLF; a Unix file ends them with LF.
// The sender (ftpd RETR, ftp_client put) turns every LF into CRLF; the receiver (ftpd STOR,
// ftp_client get) turns CRLF back into LF and keeps any other CR. A CR that ends one received
// chunk is undecided until the next chunk's first byte, so the decoder carries it across calls;
// Finish() gives it back when the stream ends on a lone CR. Encoding is stateless. What netkit-ftp,
// vsftpd (ascii_*_enable) and our ftpd do, so encode then decode gives back the file exactly.
// Pure logic (no I/O), fuzzed with the parsers. Thread-safety: one owner per decoder.
#pragma once

#include <cstddef>
#include <string>

namespace san::ftp {

// Appends in[0, n) to *out with every LF turned into CRLF.
void AsciiEncode(const char* in, size_t n, std::string* out);

class AsciiDecoder {
 public:
  // Appends in[0, n) to *out with every CRLF (also one split between calls) turned into LF.
  void Decode(const char* in, size_t n, std::string* out);
  // At the end of the stream: appends a CR still held back (the stream ended on it).
  void Finish(std::string* out);

 private:
  bool held_cr_ = false;
};

}  // namespace san::ftp
