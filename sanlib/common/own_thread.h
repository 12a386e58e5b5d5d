// StartOwnThread: starts one of sanlib's own background threads (the connection thread, the close
// thread) the way the program it lives in needs them started:
//   - with every signal blocked in it: signals are the application's, and a handler run on our
//     thread (or a sigwait that never sees its signal) would break the program;
//   - after the fd table has been grown while the process may still be alone
//     (fd_placement.h GrowFdTableWhileAlone): growing it once a second thread shares it waits
//     for an RCU grace period, milliseconds.
// Returns pthread_create's result (0, or an error number). Thread-safety: as pthread_create; the
// caller's signal mask is restored before it returns.
#pragma once

#include <pthread.h>

namespace san {

int StartOwnThread(pthread_t* thread, void* (*main)(void*), void* arg);

}  // namespace san
