"""iperf3 under sanrun against plain iperf3: one TCP stream's throughput (Gbit/s at the receiver,
from iperf3's JSON) and the CPU of both processes per GB moved. A throughput test: one mode.
The server serves one test (-1) and exits, writing its SAN_REPORT line.
"""
import json

from .pair import run_pair
from .procs import Failed, free_port
from .results import interleave

SECTION = "iperf3 (stream, unmodified program under sanrun)"


def run(ctx, results):
    seconds = 2 if ctx.quick else 5

    def measure(transport, mode, run_no):
        port = free_port()
        server = ["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"]
        client = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"]
        r = run_pair(ctx, "iperf3", transport, mode, server, client, port, seconds + 30,
                     min_bytes=10**6)
        try:
            end = json.loads(r.output)["end"]
            got = end["sum_received"]
        except (ValueError, KeyError) as e:
            raise Failed("iperf3 JSON without a result: %s" % e)
        gbytes = got["bytes"] / 1e9
        cpu = r.cpu_s / gbytes if gbytes > 0 else None
        return [("iperf3 1 stream", "throughput", "Gbit/s", True, got["bits_per_second"] / 1e9,
                 cpu, "s/GB", r.verified)]

    interleave(results, SECTION, ctx.runs, ("default",), measure,
               lambda mode: [("iperf3 1 stream", "throughput", "Gbit/s", True, "s/GB")])
    results.note(SECTION, "CPU: user+sys seconds of iperf3 server and client per GB received. "
                 "Bytes are not checked by iperf3; the path is (SAN_REPORT).")
