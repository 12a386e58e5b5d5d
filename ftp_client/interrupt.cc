#include "ftp_client/interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "ftp_client/modes.h"

namespace san::ftp::interrupt {
namespace {

volatile sig_atomic_t g_pending = 0;
volatile sig_atomic_t g_in_transfer = 0;
volatile sig_atomic_t g_exit_outside = 0;
// The self-pipe: [0] polled by the waits, [1] written by the handler. Both nonblocking, so a
// full pipe (many SIGINTs, nobody reading) never blocks the handler.
int g_wake[2] = {-1, -1};

void OnSigint(int) {
  // Nothing but async-signal-safe work here: a flag and write(2), or _exit (no atexit handlers,
  // no stdio flush: a partial download stays as written, and the kernel closes the connections).
  if (g_exit_outside && !g_in_transfer) _exit(kExitInterrupted);
  g_pending = 1;
  const int saved = errno;  // the interrupted code may be about to look at errno
  if (g_wake[1] >= 0) (void)!write(g_wake[1], "!", 1);
  errno = saved;
}

}  // namespace

void Install(Outside outside) {
  g_exit_outside = outside == Outside::kExit;
  // Without the pipe the waits still end on EINTR; only a signal in the instant before a wait
  // begins would then be seen late (at the wait's timeout).
  if (g_wake[0] < 0 && pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) g_wake[0] = g_wake[1] = -1;
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked recv/poll returns EINTR and the loop looks
  sigaction(SIGINT, &sa, nullptr);
}

bool Pending() { return g_pending != 0; }

void Clear() {
  // The flag first: a SIGINT between the two lines leaves the flag set (the pipe may be empty,
  // which is why the waits look at Pending() before they poll).
  g_pending = 0;
  char drain[64];
  while (g_wake[0] >= 0 && read(g_wake[0], drain, sizeof drain) > 0) {
  }
}

int WakeFd() { return g_wake[0]; }

TransferScope::TransferScope() { g_in_transfer = 1; }
TransferScope::~TransferScope() { g_in_transfer = 0; }

}  // namespace san::ftp::interrupt
