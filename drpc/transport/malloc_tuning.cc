#include "drpc/transport/malloc_tuning.h"

#include <malloc.h>

namespace san::drpc {
namespace {
// glibc refuses mmap thresholds above 32 MiB on 64-bit (HEAP_MAX_SIZE / 2); gRPC's reads and our
// messages are at most 16 MiB.
constexpr int kMmapThreshold = 32 * 1024 * 1024;
constexpr int kTrimThreshold = 64 * 1024 * 1024;
}  // namespace

void TuneMallocForBulkTransfers() {
  // A setting glibc refuses (another libc, another limit) leaves its default: slower, not wrong.
  (void)mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  (void)mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
}

}  // namespace san::drpc
