// ImageShape: what describes an exported stream (proto::StreamImage) beside its state bytes and
// its fds, wherever one crosses into another process: the handover message (handover.h) and the
// exec inheritance file (exec_image.h). Plain data, sent as bytes inside their headers.
//
// The bytes come from another process (or an earlier image), so a received shape is taken apart
// with ApplyShape, which bounds the state sizes and reads the parameters' bool byte-wise.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sanlib/common/status.h"
#include "sanlib/proto/stream.h"

namespace san {

struct ImageShape {
  uint64_t endpoint_state_bytes;
  uint64_t stream_state_bytes;
  proto::StreamParams params;
  uint32_t provider_caps;
  fabric::MemoryRegion recv_region;
  fabric::MemoryRegion staging_region;
};

// The shape of `image` (the state vectors' sizes, its parameters, capabilities and regions).
ImageShape ShapeOf(const proto::StreamImage& image);

// Gives `image` the received shape: parameters, capabilities, regions, and state vectors of the
// announced sizes (to be filled by the caller). EINVAL, and `image` untouched, when a state size
// is above max_state_bytes.
Status ApplyShape(const ImageShape& shape, size_t max_state_bytes, proto::StreamImage* image);

}  // namespace san
