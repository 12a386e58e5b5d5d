/* sanecho.x's one procedure, for the server rpcgen_via's generated main runs. */
#include <string.h>

#include "sanecho.h"

int *sanecho_len_1_svc(char **argp, struct svc_req *rqstp) {
  static int result;
  (void)rqstp;
  result = (int)strlen(*argp);
  return &result;
}
