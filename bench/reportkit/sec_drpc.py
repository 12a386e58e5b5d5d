"""drpc-bench (drpc on gRPC, bench/drpc): Ping round trips and Push/Pull of one file, SAN against
kernel TCP. One drpc-bench invocation per run and mode; inside it the SAN and TCP pairs alternate
in blocks (its own interleaving). drpc-bench exits 1 when the SAN channel is not on shm or a
pulled file differs from the one pushed, which fails the run here. gRPC cannot busy-poll the
kernel side: defaults and both sleeping only.
"""
import csv
import os

from .pair import SPIN_US
from .procs import Failed, run as run_prog

SECTION = "drpc (gRPC over SAN sockets vs kernel TCP)"
VERIFIED = "channel on shm (san_getinfo); pulled file compared"


def run(ctx, results):
    sizes = "0,1024" if ctx.quick else "0,64,1024,4096"
    args = (["--iters", "1000", "--warmup", "200", "--push-mb", "50", "--transfer-runs", "1"]
            if ctx.quick else ["--iters", "4000", "--push-mb", "145", "--transfer-runs", "3"])
    for run_no in range(ctx.runs):
        for mode in ("default", "sleep"):
            path = os.path.join(ctx.out, "raw", "drpc-%s-%d.csv" % (mode, run_no))
            env = {} if SPIN_US[mode] is None else {"SAN_SPIN_US": SPIN_US[mode]}
            try:
                p = run_prog([ctx.bin("drpc-bench"), "--sizes", sizes, "--csv", path] + args,
                             600, env=env, cpu=None)
                with open(ctx.log("drpc-%s" % mode), "wb") as f:
                    f.write(p.output)
                if p.status != 0:
                    tail = p.output.decode(errors="replace").strip().splitlines()[-1:]
                    raise Failed("drpc-bench exited %s: %s" % (p.status, " ".join(tail)))
                add(results, mode, run_no, list(csv.DictReader(open(path))))
            except (Failed, OSError) as e:
                print("  FAILED drpc %s run %d: %s" % (mode, run_no, e), flush=True)
                results.fail(SECTION, "drpc-bench", mode, "san", str(e),
                             [("Ping p50", "us", False, "us")])
    results.note(SECTION, "Ping CPU/op: drpcd + client process per call (/proc schedstat over the "
                 "measured blocks). Transfers: CPU ms per transfer (10 ms ticks).")
    results.note(SECTION, "Known: under the defaults the in-the-call transfers (bytes in gRPC "
                 "messages) can fall below TCP on 2 CPUs while both-sleeping rows do not: gRPC's "
                 "polling threads each spin up to SAN_SPIN_US on the CPUs the copies need "
                 "(docs/drpc.md, problems 3 and 4). The data-connection rows move the bytes "
                 "outside gRPC. Both sleeping, a SAN wake-up costs more syscalls than a kernel "
                 "socket's (the doorbell is an epoll fd, then an eventfd read and a liveness "
                 "recv; docs/bench.md), so rows bound by wake-ups (Ping, in-call transfers) sit "
                 "at parity or a little below.")


def add(results, mode, run_no, rows):
    for r in rows:
        if r["kind"] == "ping":
            name = "drpc Ping %s B" % r["size"]
            for t in ("san", "tcp"):
                results.add(SECTION, name, mode, t, run_no, "round trip p50", "us", False,
                            float(r[t + "_p50_us"]), float(r[t + "_cpu_us"]), "us",
                            VERIFIED if t == "san" else "")
        else:
            name = "drpc %s %.0f MB" % (r["kind"], int(r["size"]) / 1e6)
            for t in ("san", "tcp"):
                results.add(SECTION, name, mode, t, run_no, "throughput", "MB/s", True,
                            float(r[t + "_mean_us"]), float(r[t + "_cpu_us"]), "ms",
                            VERIFIED if t == "san" else "")
