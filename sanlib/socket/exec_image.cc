#include "sanlib/socket/exec_image.h"

#include <algorithm>
#include <cstring>

#include "sanlib/socket/image_shape.h"

namespace san::exec {
namespace {

constexpr uint32_t kMagic = 0x584e4153;  // "SANX"
constexpr uint32_t kVersion = 1;

constexpr uint32_t kCloseOnArrival = 1u << 0;
constexpr uint32_t kNonblocking = 1u << 1;
constexpr uint32_t kReadShut = 1u << 2;

struct FileHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t count;
  uint32_t reserved;
};

struct RecordHeader {
  uint32_t num_numbers;
  int32_t numbers[kMaxNumbers];
  uint32_t flags;
  uint32_t num_endpoint_fds;
  int32_t endpoint_fds[kMaxEndpointFds];
  ImageShape shape;
};

void Append(std::vector<std::byte>* out, const void* p, size_t n) {
  if (n == 0) return;  // p may be null (an empty vector's data())
  // resize + memcpy, not insert(): GCC 12 -O3 warns (-Wstringop-overflow) on the inlined insert.
  const size_t old = out->size();
  out->resize(old + n);
  memcpy(out->data() + old, p, n);
}

// Reads n bytes at *at, advancing it; false if fewer are left.
bool Take(std::span<const std::byte> bytes, size_t* at, void* out, size_t n) {
  if (bytes.size() - *at < n) return false;
  if (n == 0) return true;  // out may be null (an empty vector's data())
  memcpy(out, bytes.data() + *at, n);
  *at += n;
  return true;
}

Status Bad(const char* what) { return Status(EINVAL, what); }

}  // namespace

std::vector<std::byte> EncodeInheritance(const std::vector<InheritedSocket>& sockets) {
  std::vector<std::byte> out;
  FileHeader fh{kMagic, kVersion, static_cast<uint32_t>(sockets.size()), 0};
  Append(&out, &fh, sizeof fh);
  for (const InheritedSocket& s : sockets) {
    RecordHeader h;
    memset(static_cast<void*>(&h), 0, sizeof h);  // padding too: the bytes are deterministic
    h.num_numbers = static_cast<uint32_t>(std::min(s.numbers.size(), kMaxNumbers));
    std::copy_n(s.numbers.begin(), h.num_numbers, h.numbers);
    h.flags = (s.close_on_arrival ? kCloseOnArrival : 0) | (s.nonblocking ? kNonblocking : 0) |
              (s.read_shut ? kReadShut : 0);
    h.num_endpoint_fds = static_cast<uint32_t>(std::min(s.endpoint_fds.size(), kMaxEndpointFds));
    std::copy_n(s.endpoint_fds.begin(), h.num_endpoint_fds, h.endpoint_fds);
    h.shape = ShapeOf(s.image);
    Append(&out, &h, sizeof h);
    Append(&out, s.image.endpoint.state.data(), s.image.endpoint.state.size());
    Append(&out, s.image.state.data(), s.image.state.size());
  }
  return out;
}

Result<std::vector<InheritedSocket>> DecodeInheritance(std::span<const std::byte> bytes) {
  size_t at = 0;
  FileHeader fh;
  if (!Take(bytes, &at, &fh, sizeof fh)) return Bad("inheritance: short header");
  if (fh.magic != kMagic || fh.version != kVersion) return Bad("inheritance: not this build's");
  if (fh.count > kMaxRecords) return Bad("inheritance: too many records");
  std::vector<InheritedSocket> sockets;
  std::vector<int> seen;  // every fd number named anywhere: each may be taken once
  for (uint32_t r = 0; r < fh.count; ++r) {
    RecordHeader h;
    if (!Take(bytes, &at, &h, sizeof h)) return Bad("inheritance: short record");
    InheritedSocket s;
    if (h.num_numbers == 0 || h.num_numbers > kMaxNumbers || h.num_endpoint_fds > kMaxEndpointFds ||
        !ApplyShape(h.shape, kMaxStateBytes, &s.image).ok() ||
        (h.flags & ~(kCloseOnArrival | kNonblocking | kReadShut)) != 0) {
      return Bad("inheritance: record sizes");
    }
    s.numbers.assign(h.numbers, h.numbers + h.num_numbers);
    s.endpoint_fds.assign(h.endpoint_fds, h.endpoint_fds + h.num_endpoint_fds);
    for (const std::vector<int>* list : {&s.numbers, &s.endpoint_fds}) {
      for (int fd : *list) {
        if (fd < 0 || std::find(seen.begin(), seen.end(), fd) != seen.end()) {
          return Bad("inheritance: fd numbers");
        }
        seen.push_back(fd);
      }
    }
    s.close_on_arrival = h.flags & kCloseOnArrival;
    s.nonblocking = h.flags & kNonblocking;
    s.read_shut = h.flags & kReadShut;
    if (!Take(bytes, &at, s.image.endpoint.state.data(), s.image.endpoint.state.size()) ||
        !Take(bytes, &at, s.image.state.data(), s.image.state.size())) {
      return Bad("inheritance: short state");
    }
    sockets.push_back(std::move(s));
  }
  if (at != bytes.size()) return Bad("inheritance: trailing bytes");
  return sockets;
}

}  // namespace san::exec
