"""sockperf ping-pong under sanrun against plain sockperf: one-way latency (average and p99, as
sockperf reports them: RTT / 2) and the CPU of both processes per round trip, three ways.
'Both spin' runs both sockperfs with --nonblocked: they retry recvfrom on EAGAIN, so the
kernel side busy-polls as the SAN side spins. The client runs with --mps=5000000: sockperf sizes
its table of sequence numbers by the message rate, and with its default ('max') a SAN ping-pong
faster than about a million round trips a second overran it ("_seqN > m_maxSequenceNo", exit 6);
a ping-pong never sends faster than its round trips, so the cap changes nothing else. CPU/op
divides by the whole run's round trips (sockperf's [Total Run] line, warm-up included), as the
CPU is the whole run's. sockperf checks nothing of the payload; the path is checked
through SAN_REPORT. Three times the report's runs of 1 s each (not its runs of 3 s): this VM
switches between two wake-up states for seconds at a time (docs/bench.md), and a few long runs
caught one transport in the slow one (a 0.92x both-sleeping row that was 1.19x re-measured).
"""
import re
import signal

from .pair import run_pair
from .procs import Failed, free_port
from .results import interleave

SECTION = "sockperf (ping-pong, unmodified program under sanrun)"
SIZES = (64, 1024)


def parse(out):
    avg = re.search(r"avg-latency=([0-9.]+)", out) or re.search(
        r"Summary: Latency is ([0-9.]+)", out)
    p99 = re.search(r"percentile 99\.000 =\s*([0-9.]+)", out)
    rts = re.search(r"ReceivedMessages=(\d+)", out)
    if not (avg and p99 and rts) or int(rts.group(1)) == 0:
        raise Failed("sockperf printed no latency summary")
    return float(avg.group(1)), float(p99.group(1)), int(rts.group(1))


def run(ctx, results):
    seconds = 1
    runs = ctx.runs if ctx.quick else 3 * ctx.runs
    modes = ("default", "sleep", "spin")

    def measure(transport, mode, run_no):
        rows = []
        for size in SIZES[:1] if ctx.quick else SIZES:
            port = free_port()
            spin = ["--nonblocked"] if mode == "spin" else []
            server = ["sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", str(port)] + spin
            client = ["sockperf", "pp", "--tcp", "-i", "127.0.0.1", "-p", str(port), "-t",
                      str(seconds), "-m", str(size), "--mps=5000000"] + spin
            r = run_pair(ctx, "sockperf", transport, mode, server, client, port, seconds + 30,
                         min_bytes=size * 100,
                         stop_signal=signal.SIGINT)  # its clean exit
            avg, p99, rts = parse(r.output)
            cpu = r.cpu_s / rts * 1e6
            name = "sockperf %d B" % size
            rows.append((name, "one-way avg", "us", False, avg, cpu, "us", r.verified))
            rows.append((name, "one-way p99", "us", False, p99, cpu, "us", r.verified))
        return rows

    def expected(mode):
        return [("sockperf %d B" % s, m, "us", False, "us")
                for s in (SIZES[:1] if ctx.quick else SIZES)
                for m in ("one-way avg", "one-way p99")]

    interleave(results, SECTION, runs, modes, measure, expected)
    results.note(SECTION, "CPU/op: user+sys of sockperf server and client (wait4) / round trips "
                 "(sockperf's ReceivedMessages), whole process lifetime included.")
