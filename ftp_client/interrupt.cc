#include "interrupt.h"

#include <signal.h>
#include <unistd.h>

#include "modes.h"

namespace san::ftp::interrupt {
namespace {

volatile sig_atomic_t g_pending = 0;
volatile sig_atomic_t g_in_transfer = 0;
volatile sig_atomic_t g_exit_outside = 0;

void OnSigint(int) {
  // Nothing but async-signal-safe work here: a flag, or _exit (no atexit handlers, no stdio
  // flush: a partial download stays as written, and the kernel closes the connections).
  if (g_exit_outside && !g_in_transfer) _exit(kExitInterrupted);
  g_pending = 1;
}

}  // namespace

void Install(Outside outside) {
  g_exit_outside = outside == Outside::kExit;
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked recv/poll returns EINTR and the loop looks
  sigaction(SIGINT, &sa, nullptr);
}

bool Pending() { return g_pending != 0; }
void Clear() { g_pending = 0; }

TransferScope::TransferScope() { g_in_transfer = 1; }
TransferScope::~TransferScope() { g_in_transfer = 0; }

}  // namespace san::ftp::interrupt
