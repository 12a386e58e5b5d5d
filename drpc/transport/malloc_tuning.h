// TuneMallocForBulkTransfers: keeps large buffers in glibc's heap instead of fresh mappings.
//
// Why: gRPC allocates a new slice for every socket read and every serialized message (up to a
// few MiB each), and a Push or Pull allocates a 256 KiB chunk per message. glibc serves blocks
// from 128 KiB up with mmap and gives them back with munmap (its dynamic threshold moves only so
// far), and trims the heap top when 128 KiB is free: every such buffer then costs its pages
// again as page faults and zero-filling. Measured with `perf stat` on a 145 MB Push (release,
// both transports alike): ~28,000 page faults in the client and 4,000-25,000 in drpcd, about a
// third of each side's CPU; with these settings ~1,450 (most of them program start-up) and
// 1,800-8,700, and each side's CPU time fell by about 40 %.
// The cost: a process keeps up to kTrimThreshold of freed heap instead of returning it (bounded
// by the peak it really used).
// Thread-safety: call once at the start of main, before other threads exist.
#pragma once

namespace san::drpc {

void TuneMallocForBulkTransfers();

}  // namespace san::drpc
