"""The data path check of a SAN row: every sanlib process of the run appends one SAN_REPORT line
at exit (docs/compat.md); the row stands only if each of them carried its connections over shared
memory and they moved at least the bytes the benchmark says it moved. A row that ran (even in
part) on kernel TCP is a failure, never a SAN figure.
"""
import os

from .procs import Failed


def read(path):
    lines = []
    try:
        with open(path) as f:
            for text in f:
                fields = dict(kv.split("=", 1) for kv in text.split() if "=" in kv)
                lines.append(fields)
    except FileNotFoundError:
        pass
    return lines


def verify(path, processes, min_bytes=1, upgraded=0, short_tcp_ok=False):
    """Raises Failed unless `processes` lines (or more) say shm and none says kernel TCP.
    Lines of processes that opened no connection at all (a shell, nginx's master) are left out.
    upgraded: connections the program opens on kernel TCP and moves to shm itself (ftp_client's
    control connection, AUTH SAN), which the report counts under tcp_connections too; the
    program's own check must say they moved. short_tcp_ok: the late set-up (sanrun's default),
    where a connection that ends within its first 20 ms stays kernel TCP by design: TCP
    connections are then counted in the note, not failed; every process must still have moved
    connections to shm and min_bytes must still have come over shm.
    Returns a note for the 'verified' column."""
    lines = [l for l in read(path)
             if int(l.get("shm_connections", 0)) or int(l.get("tcp_connections", 0))]
    if len(lines) < processes:
        raise Failed("not verified as shm: %d of %d processes wrote a SAN_REPORT line" %
                     (len(lines), processes))
    shm = sum(int(l.get("shm_connections", 0)) for l in lines)
    tcp = sum(int(l.get("tcp_connections", 0)) for l in lines)
    moved = sum(int(l.get("shm_bytes_received", 0)) for l in lines)
    quiet = [l.get("prog", "?") for l in lines if int(l.get("shm_connections", 0)) == 0]
    if quiet:
        raise Failed("not on shm: %s had no shm connection" % ", ".join(quiet))
    if tcp > upgraded and not short_tcp_ok:
        raise Failed("not on shm: %d connections on kernel TCP (%s)" %
                     (tcp, ", ".join(l.get("prog", "?") for l in lines)))
    if moved < min_bytes:
        raise Failed("not on shm: %d bytes received over shm, expected >= %d" % (moved, min_bytes))
    note = "shm: %d procs, %d conns, %s" % (len(lines), shm, human_bytes(moved))
    if short_tcp_ok and tcp > upgraded:
        note += "; %d short conns on TCP (late set-up)" % (tcp - upgraded)
    return note


def human_bytes(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return "%.0f %s" % (n, unit) if unit == "B" else "%.1f %s" % (n, unit)
        n /= 1000.0


def fresh(directory, name):
    """A new, empty SAN_REPORT path for one run."""
    path = os.path.join(directory, name + ".sanreport")
    if os.path.exists(path):
        os.unlink(path)
    return path
