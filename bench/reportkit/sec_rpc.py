"""rpc-bench (ONC RPC, bench/rpc): round trips of the null procedure and of strlen over "via"
(librpcvia on sanlib) and over libtirpc's "tcp", one rpc-bench invocation per transport and run
(--nettypes via / tcp), alternating. rpc-bench compares every strlen reply with the length sent
and fails a via cell whose client is not on shm (CLGET_VIA_MODE); its --csv gives the CPU of
client and server per call. libtirpc cannot busy-poll: defaults and both sleeping only.
"""
import csv
import os

from .pair import SPIN_US
from .procs import Failed, run as run_prog
from .results import interleave

SECTION = "ONC RPC (rpc-bench: via vs libtirpc tcp)"


def run(ctx, results):
    sizes = "null,1K" if ctx.quick else "null,0,256,1K,4K"
    iters = "5000" if ctx.quick else "20000"

    def measure(transport, mode, run_no):
        path = os.path.join(ctx.out, "raw", "rpc-%s-%s-%d.csv" % (transport, mode, run_no))
        env = {} if SPIN_US[mode] is None else {"SAN_SPIN_US": SPIN_US[mode]}
        nettype = "via" if transport == "san" else "tcp"
        p = run_prog([ctx.bin("rpc-bench"), "--iters", iters, "--sizes", sizes, "--nettypes",
                      nettype, "--csv", path], 300, env=env)
        with open(ctx.log("rpc-%s-%s" % (transport, mode)), "wb") as f:
            f.write(p.output)
        try:
            rows = list(csv.DictReader(open(path)))
        except OSError:
            rows = []
        bad = [r for r in rows if r["verified"] == "FAILED"]
        if p.status != 0 or bad or not rows:
            raise Failed("rpc-bench --nettypes %s exited %s%s" % (
                nettype, p.status, " (a failed cell: wrong reply or not on shm)" if bad else ""))
        out = []
        for r in rows:
            name = "rpc %s" % ("null" if r["size"] == "null" else "strlen %s B" % r["size"])
            ver = r["verified"] if transport == "san" else ""
            out.append((name, "round trip p50", "us", False, float(r["p50_us"]),
                        float(r["cpu_us_per_call"]), "us", ver))
            out.append((name, "round trip mean", "us", False, float(r["mean_us"]),
                        float(r["cpu_us_per_call"]), "us", ver))
        return out

    def expected(mode):
        names = ["rpc null" if s == "null" else "rpc strlen %s B" % s.replace("K", "024")
                 for s in sizes.split(",")]
        return [(n, m, "us", False, "us") for n in names
                for m in ("round trip p50", "round trip mean")]

    interleave(results, SECTION, ctx.runs, ("default", "sleep"), measure, expected)
    results.note(SECTION, "CPU/op: client (getrusage) + server (/proc schedstat) per call. "
                 "libtirpc blocks in poll and cannot busy-poll: no 'spin' rows.")
