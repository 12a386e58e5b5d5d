// The standalone daemon (ftpd -D): listens, enforces max-clients and max-per-ip, and runs each
// session as a fresh ftpd image (fork + exec with the connection on fd 0), as inetd would.
//
// Why a kernel listener and exec rather than a SAN listener and a forked session: the session then
// starts with no sanlib state inherited across fork (no locks or threads of the parent's), gets a
// freshly randomised address space, and standalone and inetd sessions are one code path. The
// control connection starts as kernel TCP and a sanlib client upgrades it in band (AUTH SAN);
// data connections are SAN sockets from the start either way.
// SIGTERM/SIGINT stop the daemon and its sessions. Thread-safety: single-threaded.
#pragma once

#include "ftpd/server/config.h"

namespace san::ftp {

// Returns the process exit code.
// session_argv: the command line a session is exec'd with (ftpd's own, plus --session).
int RunDaemon(const Config& config, char* const* session_argv);

}  // namespace san::ftp
