// SAN streams for stdio: FILEs whose reads and writes go through sanlib (fopencookie).
//
// glibc's stdio calls the kernel through internal entry points no interposition reaches, so a
// FILE over a SAN connection must be a cookie stream (interpose_stdio.cc: fdopen). A program that
// inherits a SAN connection on fd 0, 1 or 2 over exec (inetd style, `prog <&3 >&3`) reads and
// writes it through stdin/stdout/stderr, which libc made before we could see it:
// AttachStandardStreams replaces those three FILE pointers with SAN streams (the variables are
// the ones the whole program and libc use). Known difference: fileno() on them returns -1.
// Thread-safety: AttachStandardStreams runs once, at start-up, before main().
#pragma once

#include <stdio.h>

namespace san::compat {

// A FILE over SAN socket fd (mode "r", "w", ...); fclose() closes the socket.
FILE* OpenSanStream(int fd, const char* mode);
// For each of fd 0-2 that is a SAN connection now: stdin/stdout/stderr become SAN streams
// (stderr unbuffered), flushed at exit before the runtime sends FIN.
void AttachStandardStreams();

}  // namespace san::compat
