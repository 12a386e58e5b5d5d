#include "sanlib/socket/image_shape.h"

#include <cstring>

namespace san {

ImageShape ShapeOf(const proto::StreamImage& image) {
  ImageShape shape;
  memset(static_cast<void*>(&shape), 0, sizeof shape);  // padding too: the bytes are deterministic
  shape.endpoint_state_bytes = image.endpoint.state.size();
  shape.stream_state_bytes = image.state.size();
  shape.params = image.params;
  shape.provider_caps = image.provider_caps;
  shape.recv_region = image.recv_region;
  shape.staging_region = image.staging_region;
  return shape;
}

Status ApplyShape(const ImageShape& shape, size_t max_state_bytes, proto::StreamImage* image) {
  if (shape.endpoint_state_bytes > max_state_bytes || shape.stream_state_bytes > max_state_bytes) {
    return Status(EINVAL, "stream image: state sizes");
  }
  memcpy(static_cast<void*>(&image->params), &shape.params, sizeof shape.params);
  // A bool is only 0 or 1: take the byte as written, not as a bool that may be neither.
  uint8_t combine_enabled;
  memcpy(&combine_enabled, &shape.params.combine.enabled, 1);
  image->params.combine.enabled = combine_enabled != 0;
  image->provider_caps = shape.provider_caps;
  image->recv_region = shape.recv_region;
  image->staging_region = shape.staging_region;
  image->endpoint.state.resize(shape.endpoint_state_bytes);
  image->state.resize(shape.stream_state_bytes);
  return Status::Ok();
}

}  // namespace san
