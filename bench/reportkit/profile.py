"""A profile for a row where SAN is below the kernel: `perf record` of one SAN run of the
benchmark, and the calls under which most samples fell (inclusive shares, every process and
thread of it), as a text block for the report. Optional: without perf, or where perf may not record, it says so and the
report goes on.
"""
import os
import re
import shutil
import subprocess

from .procs import Failed, run as run_prog


def top_symbols(ctx, tag, argv, env, limit=30):
    """Returns the text of the profile, or a line saying why there is none."""
    if not shutil.which("perf"):
        return "(no profile: perf is not installed; apt-get install linux-perf)"
    data = os.path.join(ctx.tmp, "%s.perf.data" % tag)
    try:
        p = run_prog(["perf", "record", "-q", "-F", "1999", "-g", "-o", data, "--"] + argv, 120,
                     env=env)
    except Failed as e:
        return "(no profile: %s)" % e
    if p.status != 0 or not os.path.exists(data):
        return "(no profile: perf record exited %s)" % p.status
    # Inclusive ("children") shares by symbol: which calls the time is spent under, library
    # and kernel alike; unresolved addresses are left out.
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--children", "-g", "none",
                          "--sort", "symbol", "--percent-limit", "5"],
                         capture_output=True, text=True, timeout=120)
    lines = [l.rstrip(" -") for l in rep.stdout.splitlines()
             if l.strip() and not l.startswith("#") and not re.search(r"\] (0x)?[0-9a-f]{8,}", l)]
    with open(os.path.join(ctx.out, "raw", "%s.profile.txt" % tag), "w") as f:
        f.write(rep.stdout)
    return "\n".join(lines[:limit]) or "(no profile: perf report printed nothing)"
