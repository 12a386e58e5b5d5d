#include "sanlib/socket/fd_budget.h"

#include <sys/resource.h>

#include "sanlib/proto/stream.h"

namespace san {

bool ChannelFitsFdBudget(std::string* why) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return true;
  const size_t held = proto::Stream::live() * kFdsPerChannel;
  const size_t budget = static_cast<size_t>(limit.rlim_cur / 4);
  if (held + kFdsPerChannel <= budget) return true;
  // Short enough for san_info.fallback (95 characters) with the late set-up's "move failed: ".
  *why = "this process's SAN channels hold a quarter of its fd limit (" + std::to_string(held) +
         " of " + std::to_string(limit.rlim_cur) + " fds)";
  return false;
}

}  // namespace san
