"""san-bench (the library API, SAN sockets beside kernel TCP and Unix sockets, bench/*.cc):
one-way latency and bandwidth in spin and block mode, from san-bench --json, one san-bench
invocation per run. san-bench itself verifies the payload and that every sanlib connection ran
on shm (a fallback is an error and exit status 1, which fails the run here). Its spin mode is
'both spin' (kernel sockets busy-polled with MSG_DONTWAIT), its block mode 'both sleep'.
The raw provider and Unix sockets are in a table of their own below the rows.
"""
import json
import os
import statistics

from .procs import Failed, run as run_prog

SECTION = "san-bench (library API: SOCK_SAN vs kernel TCP)"
MODE = {"spin": "spin", "block": "sleep"}
TEXT = ""
_others = {}


def label(size):
    return "%d KiB" % (size // 1024) if size >= 1024 else "%d B" % size


def run(ctx, results):
    global TEXT
    lat_sizes = "4,1K,64K" if ctx.quick else "4,64,1K,16K,64K"
    bw_sizes = "64,4K,64K" if ctx.quick else "4,64,1K,4K,64K,1M"
    seconds = "0.1" if ctx.quick else "0.4"
    for run_no in range(ctx.runs):
        for kind, sizes in (("latency", lat_sizes), ("bandwidth", bw_sizes)):
            path = os.path.join(ctx.out, "raw", "san-bench-%s-%d.json" % (kind, run_no))
            argv = [ctx.bin("san-bench"), kind, "--sizes", sizes, "--seconds", seconds,
                    "--json", path]
            if run_no == 0:
                argv += ["--plot", os.path.join(ctx.out, "plots", "san-bench-%s.png" % kind)]
                os.makedirs(os.path.join(ctx.out, "plots"), exist_ok=True)
            try:
                p = run_prog(argv, 600)
                with open(ctx.log("san-bench-%s" % kind), "wb") as f:
                    f.write(p.output)
                if p.status != 0:
                    raise Failed("san-bench %s exited %s (an error it printed: see raw/logs)" %
                                 (kind, p.status))
                rows = json.load(open(path))
            except (Failed, OSError, ValueError) as e:
                for mode in MODE.values():
                    results.fail(SECTION, "san-bench " + kind, mode, "san", str(e),
                                 [("-", "-", False, "")])
                continue
            add_rows(results, kind, rows, run_no)
    TEXT = others_table()
    results.note(SECTION, "san-bench verifies every payload and fails on a connection that "
                 "fell back to TCP; 'SAN verified' is its check. CPU/op: client (getrusage) + "
                 "server (/proc schedstat) over the measured chunks, per round trip (latency) or "
                 "per GB (bandwidth).")


def add_rows(results, kind, rows, run_no):
    for r in rows:
        mode = MODE[r["mode"]]
        key = "one_way_us" if kind == "latency" else "gbytes_per_s"
        metric = "one-way latency" if kind == "latency" else "bandwidth"
        unit = "us" if kind == "latency" else "GB/s"
        hb = kind != "latency"
        name, t = row_of(kind, r["transport"], r["size"])
        cpu = r.get("cpu_us_per_op")
        if cpu is not None and kind == "bandwidth":
            cpu = cpu * 1e-6 / (r["size"] / 1e9)  # s/GB
        if t:
            results.add(SECTION, name, mode, t, run_no, metric, unit, hb, r[key], cpu,
                        "us" if kind == "latency" else "s/GB",
                        "san-bench: payload checked, no fallback" if t == "san" else "")
        _others.setdefault((kind, mode, r["size"], r["transport"]), []).append(r[key])


def row_of(kind, transport, size):
    """(row name, 'san' or 'tcp') of a san-bench transport, or (None, None): each SAN variant is
    set against its like -- latency both TCP_NODELAY; bandwidth both TCP_NODELAY (sanlib vs
    tcp-nodelay) and both coalescing small sends (sanlib-combine vs tcp with Nagle)."""
    base = "san-bench %s" % label(size)
    if kind == "latency":
        return base, {"sanlib": "san", "tcp": "tcp"}.get(transport)
    pairs = {"sanlib": (" NODELAY both", "san"), "tcp-nodelay": (" NODELAY both", "tcp"),
             "sanlib-combine": (" coalescing (SAN combine, TCP Nagle)", "san"),
             "tcp": (" coalescing (SAN combine, TCP Nagle)", "tcp")}
    if transport not in pairs:
        return None, None
    return base + pairs[transport][0], pairs[transport][1]


def others_table():
    lines = ["Every transport san-bench measures, medians over the runs (raw-shm: the provider "
             "driven directly; `san/tcp`: sanlib against TCP with TCP_NODELAY, `san/unix` against Unix "
             "sockets, how many times better sanlib is):",
             "", "| figure | mode | size | raw-shm | sanlib | san+comb | tcp | tcp-nodelay | unix | "
             "san/tcp | san/unix |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    keys = sorted({k[:3] for k in _others}, key=lambda k: (k[0], k[1], k[2]))
    for kind, mode, size in keys:
        med = {t: statistics.median(v) for (k, m, s, t), v in _others.items()
               if (k, m, s) == (kind, mode, size)}

        def adv(other, san="sanlib"):
            a, b = med.get(san), med.get(other)
            if not a or not b:
                return "-"
            return "%.2fx" % (a / b if kind == "bandwidth" else b / a)
        cells = ["%.3g" % med[t] if t in med else "-" for t in
                 ("raw-shm", "sanlib", "sanlib-combine", "tcp", "tcp-nodelay", "unix")]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            kind + (" (us)" if kind == "latency" else " (GB/s)"), mode, label(size),
            " | ".join(cells), adv("tcp" if kind == "latency" else "tcp-nodelay"), adv("unix")))
    return "\n".join(lines)


def extra_plots(ctx):
    pngs = ["plots/san-bench-%s.png" % k for k in ("latency", "bandwidth")
            if os.path.exists(os.path.join(ctx.out, "plots", "san-bench-%s.png" % k))]
    return {SECTION: pngs}
