"""What sanrun costs a process that is not using SAN sockets for its speed: fork and exec, from
bench/compat/fork_cost.cc (fork-cost), plain against under `sanrun`. Three rows:
  fork+exit+wait, holding a listener: the process holds a SAN listener under sanrun (sanlib's
    state, connection thread and fds, which fork copies): a forking or pre-forking server
  fork+exit+wait, no sockets: sanlib's library is in the process and nothing else (a shell, make)
  fork+exec /bin/true+wait: every new program image under sanrun loads sanlib's library
Wall time and the CPU of the process and its children per iteration. Verified: under sanrun
fork-cost must report sanlib's calls in the process (and the listener a SAN socket, and
LD_PRELOAD passed to the exec'd children); plain, none of it.
"""
from .procs import Failed, run as run_prog
from .results import interleave

SECTION = "process cost (fork and exec under sanrun, no SAN traffic)"
WORKLOADS = [
    ("fork+exit+wait, holding a listener", ["fork", "--listen"]),
    ("fork+exit+wait, no sockets", ["fork"]),
    ("fork+exec /bin/true+wait", ["exec"]),
]


def parse(out):
    for line in out.splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "us" in fields and "cpu_us" in fields:
            return fields
    raise Failed("fork-cost printed no figures")


def check(fields, transport, args):
    want = "yes" if transport == "san" else "no"
    if fields.get("preload") != want:
        raise Failed("fork-cost ran with preload=%s, expected %s" % (fields.get("preload"), want))
    if "--listen" in args:
        listener = "san" if transport == "san" else "kernel"
        if fields.get("listener") != listener:
            raise Failed("the listener was %s, expected %s" % (fields.get("listener"), listener))
    if args[0] == "exec" and fields.get("ld_preload_child") != want:
        raise Failed("the exec'd children had sanlib's library: %s, expected %s" %
                     (fields.get("ld_preload_child"), want))
    if transport == "tcp":
        return "plain (no sanlib)"
    return "sanrun: " + ("SAN listener" if "--listen" in args else "library loaded") + (
        ", children preloaded" if args[0] == "exec" else "")


def run(ctx, results):
    iterations = "500" if ctx.quick else "2000"
    for name, args in WORKLOADS:
        def measure(transport, mode, run_no, name=name, args=args):
            argv = [ctx.bin("fork-cost")] + args + ["--iterations", iterations]
            if transport == "san":
                argv = [ctx.sanrun, "--"] + argv
            p = run_prog(argv, 300, cpu=1)
            out = p.output.decode(errors="replace")
            with open(ctx.log("fork-cost-%s-%s" % (args[0], transport)), "w") as f:
                f.write(out)
            if p.status != 0:
                raise Failed("fork-cost exited %s: %s" % (p.status, out.strip()[-200:]))
            fields = parse(out)
            verified = check(fields, transport, args)
            return [(name, "time", "us", False, float(fields["us"]), float(fields["cpu_us"]),
                     "us", verified)]

        interleave(results, SECTION, ctx.runs, ("-",), measure,
                   lambda mode, name=name: [(name, "time", "us", False, "us")])
    results.note(SECTION, "One process, pinned to CPU 1; its children inherit the pinning. "
                 "CPU/op: user+sys of the process and its children per iteration (getrusage). "
                 "Where the extra time goes: docs/compat.md \"What sanrun costs a "
                 "process\".")
