#include "drpc/client/fanout.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace san::drpc {

std::vector<HostResult> FanOut(const std::vector<Target>& targets, unsigned parallel,
                               const std::function<HostResult(const Target&)>& call) {
  std::vector<HostResult> results(targets.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < targets.size();) {
      results[i] = call(targets[i]);
      results[i].host = targets[i].spec;
    }
  };
  const size_t threads = std::min<size_t>(std::max(1u, parallel), targets.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return results;
}

}  // namespace san::drpc
