# A memcached client for the start-up pattern suite, in memcached's text protocol over one
# connection (one that lives long enough to move to shm): ROUNDS times, set a key to a value of
# its own (1-64 KiB of varied bytes), get it back and compare; then delete them all. Exit 0 and
# "ok ..." only if every reply was right.
import socket
import sys

port, rounds = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=30)
f = s.makefile("rb")


def expect(line):
    got = f.readline()
    if got != line:
        sys.exit("expected %r, got %r" % (line, got))


total = 0
for i in range(rounds):
    size = 1024 + (i * 7919) % (63 * 1024)
    value = bytes((i * 31 + j * 7) % 251 for j in range(size))
    key = b"k%d" % i
    s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key, size, value))
    expect(b"STORED\r\n")
    s.sendall(b"get %s\r\n" % key)
    expect(b"VALUE %s 0 %d\r\n" % (key, size))
    got = f.read(size + 2)
    if got != value + b"\r\n":
        sys.exit("round %d: value differs (%d bytes back of %d)" % (i, len(got) - 2, size))
    expect(b"END\r\n")
    total += size
for i in range(rounds):
    s.sendall(b"delete k%d\r\n" % i)
    expect(b"DELETED\r\n")
s.close()
print("ok %d rounds, %d bytes set and got back" % (rounds, total))
