/* rpc-bench's server procedures (rpcbench.x): built with the via transport and without it. */
#include <string.h>

#include "rpcbench.h"

void *rpcbench_null_1_svc(void *argp, struct svc_req *rqstp) {
  static char result;
  (void)argp;
  (void)rqstp;
  return &result;
}

int *rpcbench_strlen_1_svc(char **argp, struct svc_req *rqstp) {
  static int result;
  (void)rqstp;
  result = (int)strlen(*argp);
  return &result;
}
