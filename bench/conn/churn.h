// conn-bench churn: short connections. Each client process loops connect, send 1 byte, receive its
// echo (checked), read the connection's mode (san: shm or a fallback to tcp), close -- for a fixed
// time; one server process accepts, echoes the byte and closes, one connection at a time (like a
// one-worker server). Connections per second, CPU per connection (both processes, from wait4), and
// how many connections ran over shared memory. Without the exchange (`echo` false) the client
// waits for the server's close (EOF) instead, and the server closes at once: what the connection
// alone costs, the floor under any set-up that keeps a kernel TCP connection per connection.
#pragma once

#include <string>

#include "transport.h"

namespace san::connbench {

struct ChurnParams {
  int clients = 1;           // client processes at once
  double seconds = 2.0;      // each client's loop runs this long
  int timeout_s = 30;        // beyond seconds: a run that has not finished by then is hung
  bool echo = true;          // false: no byte exchanged (connect, the server's close, close)
  bool fork_server = false;  // the server forks a child per connection, which echoes and exits
};

struct ChurnResult {
  bool failed = false;         // hung, crashed, or not one connection worked
  std::string failure;         // why, when failed
  long connections = 0;        // echoed and verified
  long errors = 0;             // connect/send/recv/mismatch failures, client and server
  long shm = 0;                // of `connections`, those whose client end was on shared memory
  double per_second = 0;       // sum over clients of connections / the client's loop time
  double cpu_us_per_conn = 0;  // (clients' + server's user+sys) / connections
  std::string first_error;     // the first error seen, or a fallback reason
};

// One measurement: a fresh server and fresh clients.
ChurnResult RunChurn(const Calls& calls, const ChurnParams& params);

}  // namespace san::connbench
