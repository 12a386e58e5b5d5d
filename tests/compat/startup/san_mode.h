/* The SAN mode of one socket, as the start-up pattern programs report it: san_getinfo() is looked
 * up at run time (libsan_preload.so exports it under sanrun), so the same binary also runs
 * plain, where every socket is simply "plain". Thread-safe (the lookup is done once). Test-only. */
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "san/san.h" /* struct san_info and the modes only: nothing is linked */

typedef int (*san_getinfo_fn)(int fd, struct san_info* info);

static san_getinfo_fn san_mode_getinfo;
static pthread_once_t san_mode_once = PTHREAD_ONCE_INIT;

static inline void san_mode_lookup(void) {
  san_mode_getinfo = (san_getinfo_fn)dlsym(RTLD_DEFAULT, "san_getinfo");
}

/* Whether sanlib is in this process (the program runs under sanrun). */
static inline int san_mode_available(void) {
  pthread_once(&san_mode_once, san_mode_lookup);
  return san_mode_getinfo != NULL;
}

/* "shm", "tcp", "verbs", "none" (not connected), "untracked" (sanlib does not know the fd) or
 * "plain" (no sanlib here); `why` gets the fallback reason ("" if none). */
static inline const char* san_mode_of(int fd, char* why, size_t why_len) {
  if (why_len > 0) why[0] = '\0';
  if (!san_mode_available()) return "plain";
  struct san_info info;
  memset(&info, 0, sizeof info);
  if (san_mode_getinfo(fd, &info) != 0) return "untracked";
  snprintf(why, why_len, "%s", info.fallback);
  switch (info.mode) {
    case SAN_MODE_SHM: return "shm";
    case SAN_MODE_TCP: return "tcp";
    case SAN_MODE_VERBS: return "verbs";
    default: return "none";
  }
}
