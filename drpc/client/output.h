// Output of the drpc CLI: pdsh-style lines prefixed with the node ("n1: text"), written whole
// (one line at a time under a lock) however many nodes answer at once; or, with --json, nothing
// until the end and then one JSON object.
// HostStream turns a node's streamed bytes (Exec output) into whole prefixed lines: a partial
// line waits for its end (or Flush), so two nodes' output never interleaves inside a line.
// Thread-safety: Output is thread-safe; a HostStream belongs to one thread.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace san::drpc {

class Output {
 public:
  explicit Output(bool json) : json_(json) {}
  bool json() const { return json_; }
  // "host: text\n" on stdout (or stderr); nothing in JSON mode.
  void Line(const std::string& host, std::string_view text, bool to_stderr = false);

 private:
  const bool json_;
  std::mutex mu_;
};

class HostStream {
 public:
  HostStream(Output* out, std::string host, bool to_stderr)
      : out_(out), host_(std::move(host)), to_stderr_(to_stderr) {}
  ~HostStream() { Flush(); }
  void Write(std::string_view data);
  void Flush();

 private:
  Output* out_;
  std::string host_;
  bool to_stderr_;
  std::string partial_;
};

// A JSON string literal (quotes included); bytes that are not valid UTF-8 become U+FFFD.
std::string JsonString(std::string_view s);

}  // namespace san::drpc
