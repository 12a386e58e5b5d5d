# An echo client for the transparency suite: connects to 127.0.0.1:PORT, sends 1 MiB, shuts down
# writing, reads until EOF; exit 0 and "ok ..." if every byte came back in order.
import socket
import sys

port = int(sys.argv[1])
data = bytes(range(256)) * 4096
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = bytearray()
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
if bytes(got) != data:
    sys.exit("echo differs: %d of %d bytes" % (len(got), len(data)))
print("ok %d bytes echoed, then EOF" % len(got))
