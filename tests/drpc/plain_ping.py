"""A plain gRPC client (Debian's python3-grpcio) calling drpcd's Ping over kernel TCP.

Usage: plain_ping.py GENERATED_DIR PORT
GENERATED_DIR holds drpc_pb2.py, made by `protoc --python_out` from drpc/proto/drpc.proto at test
time. The call goes through grpcio's generic unary_unary (no generated service stub needed), by
the method's wire name /drpc.Node/Ping. Prints "ok <n>" after n echoed payloads; exits non-zero on
any mismatch or RPC error. Status without a token must be refused with UNAUTHENTICATED.
"""
import sys

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
import drpc_pb2  # noqa: E402


def main():
    port = int(sys.argv[2])
    with grpc.insecure_channel("127.0.0.1:%d" % port) as channel:
        ping = channel.unary_unary(
            "/drpc.Node/Ping",
            request_serializer=drpc_pb2.PingRequest.SerializeToString,
            response_deserializer=drpc_pb2.PingReply.FromString)
        n = 0
        for size in (0, 1, 64, 4096, 100000):
            payload = bytes((i * 7 + size) % 256 for i in range(size))
            reply = ping(drpc_pb2.PingRequest(payload=payload), timeout=10)
            if reply.payload != payload:
                print("payload mismatch at size %d" % size)
                return 1
            n += 1
        status = channel.unary_unary(
            "/drpc.Node/Status",
            request_serializer=drpc_pb2.StatusRequest.SerializeToString,
            response_deserializer=drpc_pb2.StatusReply.FromString)
        try:
            status(drpc_pb2.StatusRequest(), timeout=10)
            print("status without a token was answered")
            return 1
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAUTHENTICATED:
                print("status without a token: %s" % e.code())
                return 1
        reply = status(drpc_pb2.StatusRequest(), timeout=10,
                       metadata=(("authorization", "Bearer " + sys.argv[3]),))
        print("ok %d transport=%s" % (n, reply.transport))
    return 0


if __name__ == "__main__":
    sys.exit(main())
