"""NetPIPE (NPtcp) under sanrun against plain NPtcp: one-way latency at small sizes and bandwidth
at large ones, from NPtcp's output file (bytes, Mbit/s, seconds per one-way message), three ways.
Before the measured runs, each transport runs NPtcp -i (integrity check: every byte of every
message compared) over the same sizes, and a SAN row stands only if that check passed over shm.
--quick fixes NPtcp's repeats per size at 1000 (-n), else NPtcp sizes them itself.
NPtcp sweeps many sizes in one process pair, so its CPU column is the CPU the pair used per
second of the sweep (2.0: both processes always busy), not per operation.
"""
import os

from .pair import run_pair
from .procs import Failed, free_port
from .results import interleave

SECTION = "NetPIPE (NPtcp, unmodified program under sanrun)"
LATENCY_SIZES = (4, 64, 1024)
BANDWIDTH_SIZES = (65536, 1048576)


def sweep(ctx, transport, mode, integrity, upper):
    port = free_port()
    out = os.path.join(ctx.tmp, "np.%s.%s" % (transport, mode))
    if os.path.exists(out):
        os.unlink(out)
    extra = (["-i"] if integrity else []) + (["-n", "1000"] if ctx.quick else [])
    server = ["NPtcp", "-P", str(port), "-p", "0", "-u", str(upper)] + extra
    client = ["NPtcp", "-h", "127.0.0.1", "-P", str(port), "-p", "0", "-u", str(upper),
              "-o", out] + extra
    r = run_pair(ctx, "nptcp" + ("-i" if integrity else ""), transport, mode, server, client,
                 port, 300, min_bytes=upper)
    if integrity:
        text = r.output.lower()
        if "fail" in text or "error" in text or "mismatch" in text:
            raise Failed("NPtcp -i reported an integrity error")
        return r, {}
    points = {}
    with open(out) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 3:
                points[int(float(fields[0]))] = (float(fields[1]), float(fields[2]))
    return r, points


def run(ctx, results):
    upper = BANDWIDTH_SIZES[-1] if not ctx.quick else BANDWIDTH_SIZES[0]
    bw_sizes = [s for s in BANDWIDTH_SIZES if s <= upper]
    checked = {}
    for transport in ("san", "tcp"):
        try:
            r, _ = sweep(ctx, transport, "default", True, upper)
            checked[transport] = "NPtcp -i passed; " + r.verified
        except Failed as e:
            checked[transport] = None
            results.note(SECTION, "NPtcp -i over %s FAILED: %s" % (transport, e))

    def measure(transport, mode, run_no):
        if not checked.get(transport):
            raise Failed("the integrity run (NPtcp -i) did not pass")
        r, points = sweep(ctx, transport, mode, False, upper)
        util = r.cpu_s / r.wall_s if r.wall_s else None
        ver = checked[transport] if transport == "tcp" else "%s; %s" % (
            checked[transport], r.verified)
        rows = []
        for s in LATENCY_SIZES:
            if s not in points:
                raise Failed("NPtcp measured no %d B point" % s)
            rows.append(("NPtcp %d B" % s, "one-way latency", "us", False, points[s][1] * 1e6,
                         util, "CPU s/s", ver))
        for s in bw_sizes:
            if s not in points:
                raise Failed("NPtcp measured no %d B point" % s)
            rows.append(("NPtcp %d B" % s, "bandwidth", "Mbit/s", True, points[s][0], util,
                         "CPU s/s", ver))
        return rows

    def expected(mode):
        return ([("NPtcp %d B" % s, "one-way latency", "us", False, "CPU s/s")
                 for s in LATENCY_SIZES] +
                [("NPtcp %d B" % s, "bandwidth", "Mbit/s", True, "CPU s/s") for s in bw_sizes])

    interleave(results, SECTION, ctx.runs, ("default", "sleep"), measure, expected)
    results.note(SECTION, "NPtcp has no busy-poll option for the kernel side: no 'spin' rows. "
                 "CPU s/s: user+sys of both NPtcp processes / wall time of the sweep "
                 "(sizes 1 B .. %d B, no perturbation)." % upper)
