# A gRPC echo over Debian's python3-grpcio (its default epoll poller), for the transparency suite.
#   grpc_echo.py server PORT SECONDS   serves /t.Echo/Echo on 127.0.0.1:PORT for SECONDS
#   grpc_echo.py client PORT           waits for the channel (5 s), makes 200 echoes of 100 KiB
#                                      and checks every byte; exit 0 and "ok ..." on success
import signal
import sys
import threading
from concurrent import futures

import grpc


def identity(b):
    return b


def serve(port, seconds):
    handler = grpc.method_handlers_generic_handler(
        "t.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(lambda req, ctx: req, identity, identity)})
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("127.0.0.1:%d" % port)
    # SIGINT or SIGTERM ends it early, with a normal interpreter exit (sanrun's SAN_REPORT line
    # is written by the exit handlers).
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    server.start()
    done.wait(seconds)
    server.stop(0).wait()


def call(port):
    channel = grpc.insecure_channel("127.0.0.1:%d" % port)
    grpc.channel_ready_future(channel).result(timeout=5)
    echo = channel.unary_unary("/t.Echo/Echo", request_serializer=identity,
                               response_deserializer=identity)
    data = bytes(range(256)) * 400
    for i in range(200):
        if echo(data, timeout=5) != data:
            sys.exit("echo %d differs" % i)
    print("ok 200 echoes of %d bytes" % len(data))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]), float(sys.argv[3]))
    else:
        call(int(sys.argv[2]))
