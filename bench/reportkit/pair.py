"""One run of a client/server pair of real programs, as the application rows need it: both
plain (kernel TCP) or both under `sanrun --` (SAN), server pinned to CPU 0 and client to CPU 1,
the mode's SAN_SPIN_US, a SAN_REPORT file for the SAN side, and the CPU of both processes.

The server is started, awaited on its listening port (read from /proc, no probe connection),
the client runs to its end, then the server is stopped with SIGTERM (it writes its SAN_REPORT
line at exit) and both are reaped. For a SAN run the report is verified (sanpath.verify): a run
that did not go over shm raises Failed.
"""
import os
import signal
import time

from . import sanpath
from .procs import Failed, Proc, reap_orphans, run, wait_listening

SPIN_US = {"default": None, "sleep": "0", "spin": "10000000"}


class Context:
    """What every section needs: the build, where logs go, how long runs may take."""

    def __init__(self, build, out, tmp, quick, runs):
        self.build, self.out, self.tmp, self.quick, self.runs = build, out, tmp, quick, runs
        self.sanrun = os.path.join(build, "bin", "sanrun")
        self.logs = os.path.join(out, "raw", "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.counter = 0

    def bin(self, name):
        return os.path.join(self.build, "bin", name)

    def log(self, tag):
        self.counter += 1
        return os.path.join(self.logs, "%04d-%s.log" % (self.counter, tag))


def san_env(mode, report):
    env = {"SAN_REPORT": report}
    if SPIN_US.get(mode) is not None:
        env["SAN_SPIN_US"] = SPIN_US[mode]
    return env


def wrap(ctx, transport, argv, preload=True):
    """Under sanrun for SAN, unless the program is linked with sanlib itself (preload=False)."""
    return [ctx.sanrun, "--"] + list(argv) if transport == "san" and preload else list(argv)


class PairResult:
    def __init__(self, client, server, verified, orphans_cpu):
        self.output = client.output.decode(errors="replace")
        self.server_cpu_s = (server.cpu_s or 0) + orphans_cpu
        self.client_cpu_s = client.cpu_s
        self.cpu_s = (client.cpu_s or 0) + self.server_cpu_s
        self.wall_s = client.wall_s
        self.verified = verified


def run_pair(ctx, tag, transport, mode, server_argv, client_argv, port, timeout,
             min_bytes=1, processes=2, server_env=None, probe=None, check=None,
             stop_signal=signal.SIGTERM, preload=True, tcp_env=None, client_cpu=1,
             upgraded=0, settle_s=0.0):
    """probe: a second client (argv) run the same way after the measured one, to fetch known
    bytes; check(client_output, probe_output) raises Failed on a wrong reply. Under sanrun's
    default, late set-up a short connection stays kernel TCP by design (the probe's, and those a
    benchmark opens before its measured ones: redis-benchmark's CONFIG GET, wrk's first connect):
    the probe writes a SAN_REPORT of its own, not verified, and the path is verified on the
    measured traffic's bytes (sanpath.verify, short_tcp_ok). Returns
    PairResult. preload=False: both programs are linked with sanlib (no sanrun); tcp_env is then
    what makes their TCP run plain (SAN_PROVIDER=off)."""
    report = sanpath.fresh(ctx.tmp, tag)
    env = san_env(mode, report) if transport == "san" else dict(tcp_env or {})
    senv = dict(env)
    senv.update(server_env or {})
    server = Proc(wrap(ctx, transport, server_argv, preload), env=senv, cpu=0,
                  log=ctx.log("%s-%s-%s-server" % (tag, transport, mode)))
    try:
        wait_listening(port, server)
        client = Proc(wrap(ctx, transport, client_argv, preload), env=env, cpu=client_cpu,
                      capture=True)
        status = client.wait(timeout)
        with open(ctx.log("%s-%s-%s-client" % (tag, transport, mode)), "wb") as f:
            f.write(client.output)
        if status != 0:
            tail = client.output.decode(errors="replace").strip().splitlines()[-1:]
            raise Failed("%s exited %s: %s" % (client.name, status, " ".join(tail)))
        probe_out = ""
        if probe:
            probe_env = dict(env)
            if "SAN_REPORT" in probe_env:
                probe_env["SAN_REPORT"] = report + ".probe"
            probe_out = run(wrap(ctx, transport, probe, preload), 30, env=probe_env).output.decode(
                errors="replace")
    finally:
        if settle_s:  # let a daemon reap the session that served the client, for its CPU
            time.sleep(settle_s)
        server.stop(stop_signal)
        orphans_cpu = reap_orphans()  # a server's processes whose parent exited first
    if check:
        check(client.output.decode(errors="replace"), probe_out)
    verified = "kernel TCP"
    if transport == "san":
        setup = env.get("SAN_SETUP", os.environ.get("SAN_SETUP", "late"))  # sanrun's default
        late = preload and setup == "late"
        verified = sanpath.verify(report, processes, min_bytes, upgraded, short_tcp_ok=late)
    return PairResult(client, server, verified, orphans_cpu)
