// libFuzzer target for the wire decoders (proto/wire.h): the immediate, the WAKEUP, ADVERT and PUT
// bodies, the move header and the connect request. Any input must be either rejected or accepted as
// something that re-encodes to exactly the same bytes; a crash, sanitizer report or trap is a
// finding.
//
// Built only by compilers that support -fsanitize=fuzzer (clang); not a ctest. Run, e.g.:
//   CC=clang CXX=clang++ cmake -B build/fuzz -DSAN_SANITIZE=address && \
//   cmake --build build/fuzz --target proto_wire_fuzz && build/fuzz/bin/proto_wire_fuzz
//   -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sanlib/proto/wire.h"

namespace {

void Require(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace san::proto;
  using san::Result;
  // The immediate: the first four bytes.
  if (size >= 4) {
    uint32_t imm;
    memcpy(&imm, data, 4);
    Result<Header> h = DecodeImm(imm);
    Require(h.ok() ? EncodeImm(h.value()) == imm : h.status().code() == EPROTO);
  }
  // The WAKEUP body: the whole input (a received packet of any length).
  Result<WakeupBody> w = DecodeWakeup(reinterpret_cast<const std::byte*>(data), size);
  if (w.ok()) {
    std::byte out[WakeupBody::kSize];
    EncodeWakeup(w.value(), out);
    Require(size == WakeupBody::kSize && memcmp(out, data, size) == 0);
  } else {
    Require(w.status().code() == EPROTO);
  }
  // The single-copy bodies: the whole input, like the WAKEUP.
  Result<AdvertBody> a = DecodeAdvert(reinterpret_cast<const std::byte*>(data), size);
  if (a.ok()) {
    std::byte out[AdvertBody::kSize];
    EncodeAdvert(a.value(), out);
    Require(size == AdvertBody::kSize && memcmp(out, data, size) == 0);
  } else {
    Require(a.status().code() == EPROTO);
  }
  Result<PutBody> p = DecodePut(reinterpret_cast<const std::byte*>(data), size);
  if (p.ok()) {
    std::byte out[PutBody::kSize];
    EncodePut(p.value(), out);
    Require(size == PutBody::kSize && memcmp(out, data, size) == 0);
  } else {
    Require(p.status().code() == EPROTO);
  }
  Result<MoveHeader> mh = DecodeMoveHeader(reinterpret_cast<const std::byte*>(data), size);
  if (mh.ok()) {
    std::byte out[MoveHeader::kSize];
    EncodeMoveHeader(mh.value(), out);
    Require(size == MoveHeader::kSize && memcmp(out, data, size) == 0);
  } else {
    Require(mh.status().code() == EPROTO);
  }
  // The connect request: byte 0 is the claimed length, the rest the bytes.
  if (size >= 1) {
    san::fabric::ConnectData d;
    d.length = data[0];
    const size_t n = size - 1 < sizeof(d.bytes) ? size - 1 : sizeof(d.bytes);
    memcpy(d.bytes, data + 1, n);
    Result<FourTuple> t = DecodeConnectRequest(d);
    if (t.ok()) {
      san::fabric::ConnectData again = EncodeConnectRequest(t.value());
      Require(again.length == d.length && memcmp(again.bytes, d.bytes, d.length) == 0);
    } else {
      Require(t.status().code() == EPROTO);
    }
  }
  return 0;
}
