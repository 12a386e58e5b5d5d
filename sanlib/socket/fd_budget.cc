#include "sanlib/socket/fd_budget.h"

#include <sys/resource.h>

#include <atomic>
#include <cstdint>

#include "sanlib/proto/stream.h"

namespace san {

namespace {

std::atomic<long> holders_pipes{0};

// How many more channels fit in the budget beside the live ones (SIZE_MAX: no limit); if none,
// why (`why` may be null).
size_t ChannelsLeft(std::string* why) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  const long pipes = holders_pipes.load(std::memory_order_relaxed);
  const size_t held = proto::Stream::live() * kFdsPerChannel +
                      static_cast<size_t>(pipes > 0 ? pipes : 0) * kFdsPerHoldersPipe;
  const size_t budget = static_cast<size_t>(limit.rlim_cur / 4);
  if (held + kFdsPerChannel <= budget) return (budget - held) / kFdsPerChannel;
  // Short enough for san_info.fallback (95 characters) with the late set-up's "move failed: ".
  if (why) {
    *why = "this process's SAN channels hold a quarter of its fd limit (" + std::to_string(held) +
           " of " + std::to_string(limit.rlim_cur) + " fds)";
  }
  return 0;
}

}  // namespace

void CountHoldersPipes(int delta) { holders_pipes.fetch_add(delta, std::memory_order_relaxed); }

bool ChannelFitsFdBudget(std::string* why) { return ChannelsLeft(why) > 0; }

LateSideRoom RoomForLateSide(size_t open, std::string* why) {
  const size_t left = ChannelsLeft(why);
  if (left == 0) return LateSideRoom::kFull;
  return open < left ? LateSideRoom::kOpen : LateSideRoom::kWait;
}

}  // namespace san
