// SCM_RIGHTS: passing fds over a Unix socket, both halves, for every sanlib message that carries
// fds (the shm rendezvous, fork handover, handover claims).
//
// PackRights puts the fds into a message's control data; TakeRights takes ownership of the fds a
// received message carried -- all of them, first, whatever else is wrong with the message, so none
// leaks -- and moves each to sanlib's high fd range (fd_placement.h).
// Thread-safety: plain functions on caller-owned buffers.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <vector>

#include "sanlib/common/unique_fd.h"

namespace san {

// `control` must hold CMSG_SPACE(sizeof(int) * count) bytes, aligned for cmsghdr; it becomes
// mh->msg_control. count == 0 leaves mh without control data.
void PackRights(const int* fds, size_t count, char* control, msghdr* mh);
// Appends every fd of every SCM_RIGHTS message in mh (after a successful recvmsg) to *out.
void TakeRights(const msghdr& mh, std::vector<UniqueFd>* out);

}  // namespace san
