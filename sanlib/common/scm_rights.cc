#include "sanlib/common/scm_rights.h"

#include <cstring>

#include "sanlib/common/fd_placement.h"

namespace san {

void PackRights(const int* fds, size_t count, char* control, msghdr* mh) {
  if (count == 0) return;
  mh->msg_control = control;
  mh->msg_controllen = CMSG_SPACE(sizeof(int) * count);
  cmsghdr* cm = CMSG_FIRSTHDR(mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * count);
  std::memcpy(CMSG_DATA(cm), fds, sizeof(int) * count);
}

void TakeRights(const msghdr& mh, std::vector<UniqueFd>* out) {
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr;
       cm = CMSG_NXTHDR(const_cast<msghdr*>(&mh), cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      out->emplace_back(PlaceHigh(fd));
    }
  }
}

}  // namespace san
