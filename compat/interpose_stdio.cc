// Interposed fdopen(): a FILE on a SAN connection whose reads and writes go through sanlib.
//
// glibc's stdio calls the kernel through its own internal entry points, which no interposition
// reaches; so a FILE over a SAN socket is a fopencookie() stream whose functions call the SAN data
// path (SOVIA Figure 3: fprintf(fdopen(s, "w"), ...) must work). fclose() closes the socket, as it
// closes the fd of an ordinary FILE. Known difference: fileno() on such a FILE returns -1 (glibc
// keeps no fd for cookie streams). Other fds get libc's fdopen unchanged.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include <cstdint>
#include <cstring>

#include "compat/managed.h"
#include "compat/real_calls.h"
#include "compat/stdio_streams.h"
#include "san/san.h"
#include "sanlib/socket/socket_ops.h"

using san::compat::ManagedData;
using san::compat::Real;

namespace {

int FdOf(void* cookie) { return static_cast<int>(reinterpret_cast<intptr_t>(cookie)); }

ssize_t CookieRead(void* cookie, char* buf, size_t len) {
  return san_recv(FdOf(cookie), buf, len, 0);  // -1 sets the FILE's error flag
}

// stdio expects everything written (or an error): send until done.
ssize_t CookieWrite(void* cookie, const char* buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    const ssize_t n = san_send(FdOf(cookie), buf + done, len - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return done > 0 ? static_cast<ssize_t>(done) : -1;
    }
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

int CookieSeek(void*, off64_t*, int) {
  errno = ESPIPE;  // a socket, as lseek() on it says
  return -1;
}

int CookieClose(void* cookie) { return san::Close(FdOf(cookie)); }

// fdopen's check that the mode fits how the fd was opened (EINVAL otherwise).
bool ModeFits(int fd, const char* mode) {
  const int flags = Real().fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  const int access = flags & O_ACCMODE;
  const bool wants_read = mode[0] == 'r' || strchr(mode, '+');
  const bool wants_write = mode[0] == 'w' || mode[0] == 'a' || strchr(mode, '+');
  return (!wants_read || access != O_WRONLY) && (!wants_write || access != O_RDONLY);
}

FILE* swapped_streams[3] = {};

void FlushSwappedStreams() {
  for (FILE* f : swapped_streams) {
    if (f) fflush(f);
  }
}

}  // namespace

namespace san::compat {

FILE* OpenSanStream(int fd, const char* mode) {
  const cookie_io_functions_t io{CookieRead, CookieWrite, CookieSeek, CookieClose};
  return fopencookie(reinterpret_cast<void*>(static_cast<intptr_t>(fd)), mode, io);
}

void AttachStandardStreams() {
  FILE** streams[3] = {&stdin, &stdout, &stderr};
  const char* modes[3] = {"r", "w", "w"};
  bool any = false;
  for (int fd = 0; fd < 3; ++fd) {
    if (!ManagedData(fd)) continue;
    FILE* f = OpenSanStream(fd, modes[fd]);
    if (!f) continue;
    if (fd == 2) setvbuf(f, nullptr, _IONBF, 0);  // stderr stays unbuffered
    *streams[fd] = f;
    swapped_streams[fd] = f;
    any = true;
  }
  // exit() flushes stdio only after the atexit handlers, the runtime's among them, have sent
  // FIN: flush ours first (handlers run in reverse order of registration; the runtime exists).
  if (any) atexit(FlushSwappedStreams);
}

}  // namespace san::compat

extern "C" FILE* fdopen(int fd, const char* mode) {
  if (!ManagedData(fd) || !mode) return Real().fdopen(fd, mode);
  if (!strchr("rwa", mode[0])) {
    errno = EINVAL;
    return nullptr;
  }
  if (Real().fcntl(fd, F_GETFD) < 0) return nullptr;  // EBADF
  if (!ModeFits(fd, mode)) {
    errno = EINVAL;
    return nullptr;
  }
  return san::compat::OpenSanStream(fd, mode);
}
