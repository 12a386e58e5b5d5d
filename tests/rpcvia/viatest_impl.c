/* The via test server's procedures (tests/rpcvia/viatest.x). Built twice: with librpcvia
 * (RPCGEN_VIA_TRANSPORT) and as a plain libtirpc server, the peer of the fallback tests. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "viatest.h"

#ifdef RPCGEN_VIA_TRANSPORT
#include <san/san.h>
#endif

void *viatest_null_1_svc(void *argp, struct svc_req *rqstp) {
  static char result;
  (void)argp;
  (void)rqstp;
  return &result;
}

int *viatest_strlen_1_svc(char **argp, struct svc_req *rqstp) {
  static int result;
  (void)rqstp;
  result = (int)strlen(*argp);
  return &result;
}

viatest_blob *viatest_echo_1_svc(viatest_blob *argp, struct svc_req *rqstp) {
  static viatest_blob result;
  (void)rqstp;
  free(result.viatest_blob_val);
  result.viatest_blob_len = argp->viatest_blob_len;
  result.viatest_blob_val = malloc(argp->viatest_blob_len ? argp->viatest_blob_len : 1);
  if (result.viatest_blob_val == NULL) return NULL;
  if (argp->viatest_blob_len > 0) {
    memcpy(result.viatest_blob_val, argp->viatest_blob_val, argp->viatest_blob_len);
  }
  return &result;
}

int *viatest_sleep_ms_1_svc(int *argp, struct svc_req *rqstp) {
  static int result;
  struct timespec ts;
  (void)rqstp;
  ts.tv_sec = *argp / 1000;
  ts.tv_nsec = (long)(*argp % 1000) * 1000000L;
  nanosleep(&ts, NULL);
  result = *argp;
  return &result;
}

int *viatest_exit_1_svc(int *argp, struct svc_req *rqstp) {
  (void)rqstp;
  _exit(*argp);
}

char **viatest_path_1_svc(void *argp, struct svc_req *rqstp) {
  static char *result;
  (void)argp;
  result = "tcp";
  if (rqstp->rq_xprt->xp_netid != NULL && strcmp(rqstp->rq_xprt->xp_netid, "udp") == 0) {
    result = "udp";
  }
#ifdef RPCGEN_VIA_TRANSPORT
  {
    struct san_info info;
    if (san_getinfo(rqstp->rq_xprt->xp_fd, &info) == 0) {
      if (info.mode == SAN_MODE_SHM) result = "shm";
      if (info.mode == SAN_MODE_VERBS) result = "verbs";
    }
  }
#endif
  return &result;
}
