#include "sanlib/common/own_thread.h"

#include <signal.h>

#include "sanlib/common/fd_placement.h"

namespace san {

int StartOwnThread(pthread_t* thread, void* (*main)(void*), void* arg) {
  GrowFdTableWhileAlone();
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(thread, nullptr, main, arg);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc;
}

}  // namespace san
