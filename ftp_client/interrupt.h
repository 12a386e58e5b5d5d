// Ctrl-C (SIGINT) for ftp_client, netkit-ftp style: during a transfer it asks the transfer to stop
// (FtpClient then sends ABOR and reads the server's replies); while a command waits for its reply
// it stops the wait (the reply is skipped when it comes: OwedReplies); at the interactive prompt
// it gives a new prompt; in batch mode, outside a transfer, it ends the program at once
// (kExitInterrupted).
//
// The handler only sets a flag and writes a byte to a pipe (or calls _exit): the transfer loops
// poll Pending() between chunks, FtpClient's network waits poll WakeFd() beside their socket (a
// signal landing just before a wait begins still ends it), and blocking calls return EINTR
// because the handler is installed without SA_RESTART (sanlib's own threads block every signal,
// so the main thread is the one interrupted).
// Thread-safety: one process-wide flag of sig_atomic_t and one pipe; call Install once, from main,
// before any other thread exists.
#pragma once

namespace san::ftp::interrupt {

enum class Outside {
  kFlag,  // interactive: only set the flag; the prompt loop clears it
  kExit,  // batch: _exit(kExitInterrupted) unless a TransferScope is open
};

void Install(Outside outside);
// SIGINT seen since the last Clear()?
bool Pending();
// Forgets the SIGINTs seen so far (the flag, and the pipe read dry).
void Clear();
// Readable after a SIGINT until Clear() (-1 before Install): for poll beside a socket.
int WakeFd();

// While one exists, SIGINT sets the flag instead of ending a batch run (Outside::kExit).
class TransferScope {
 public:
  TransferScope();
  ~TransferScope();
  TransferScope(const TransferScope&) = delete;
  TransferScope& operator=(const TransferScope&) = delete;
};

}  // namespace san::ftp::interrupt
