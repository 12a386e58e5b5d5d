// Client side of the transport: a gRPC channel to one node, carried over a SAN socket
// (san://host:port) or a kernel TCP socket (host:port).
//
// We make and connect the socket ourselves and hand the connected fd to gRPC
// (grpc::CreateCustomInsecureChannelFromFd). gRPC then does its own I/O on it (recvmsg, sendmsg,
// epoll, fcntl); the compatibility layer linked into the program (san_compat, whole archive)
// routes those calls through sanlib for a SAN socket. A plain target's socket is made with the
// raw socket syscall, so the compat layer's policy (which would make an AF_INET stream socket
// SAN-capable) cannot turn it into a SAN socket: "plain" stays kernel TCP, which is what the
// benchmark's baseline and the fallback tests need. A SAN socket whose peer is not sanlib falls
// back to TCP by itself.
// The channel is bound to that one connection: no reconnection (a CLI call or a benchmark run
// makes a new channel if it needs one).
// Thread-safety: MakeChannel is thread-safe; the channel is gRPC's (thread-safe).
#pragma once

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "drpc/core/target.h"
#include "sanlib/common/status.h"

namespace san::drpc {

// The largest gRPC message either side accepts (4 MiB pings plus framing, file chunks).
inline constexpr int kMaxMessageBytes = 16 * 1024 * 1024;

struct ChannelInfo {
  std::string mode;  // "shm", "tcp", or "tcp (fallback reason)" from san_getinfo
};

// Resolves the target and connects within timeout_ms (each address in turn): a SAN socket for a
// san:// target, a kernel one otherwise, nonblocking, TCP_NODELAY set; close it with san_close.
// -1 on failure, with *error as for MakeChannel.
int ConnectTarget(const Target& target, uint32_t timeout_ms, std::string* error);

// Resolves the target, connects within timeout_ms (each address in turn), and wraps the socket
// in a channel. On failure *error says what failed ("connect 127.0.0.1:7467: Connection refused").
std::shared_ptr<grpc::Channel> MakeChannel(const Target& target, uint32_t timeout_ms,
                                           std::string* error, ChannelInfo* info = nullptr);

// Human-readable mode of a connected socket fd: "shm", "tcp", "tcp (reason)", "kernel".
std::string DescribeSocket(int fd);

}  // namespace san::drpc
