"""redis-benchmark against redis-server, both under sanrun or both plain: requests/s of SET and
GET (from --csv) with one client (a latency: defaults and both sleeping; redis cannot busy-poll) and with 50 (a load: defaults only), and
the CPU of both processes per request. After each run a redis-cli SET of 4 KB of known bytes and
its GET must give them back, over the same transport.
"""
import csv
import io
import secrets

from .pair import run_pair
from .procs import Failed, free_port
from .results import interleave

SECTION = "redis (redis-benchmark, unmodified programs under sanrun)"


def parse(out):
    rates = {}
    for row in csv.reader(io.StringIO(out)):
        if len(row) >= 2 and row[0] in ("SET", "GET"):
            rates[row[0]] = float(row[1])
    if set(rates) != {"SET", "GET"}:
        raise Failed("redis-benchmark printed no SET/GET rate")
    return rates


def run(ctx, results):
    value = secrets.token_hex(2048)
    plans = [(1, ("default", "sleep")), (50, ("default",))]

    def check(_, probe_out):
        if value not in probe_out:
            raise Failed("redis-cli GET did not return the value SET")

    for clients, modes in plans:
        n = (5000 if ctx.quick else 20000) * (1 if clients == 1 else 4)
        name = "redis-benchmark -c %d" % clients

        def measure(transport, mode, run_no, clients=clients, n=n, name=name):
            port = free_port()
            server = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no"]
            client = ["redis-benchmark", "-p", str(port), "-t", "set,get", "-n", str(n), "-c",
                      str(clients), "--csv"]
            probe = ["sh", "-c", "redis-cli -p %d set reportkey %s >/dev/null && "
                     "redis-cli -p %d --raw get reportkey" % (port, value, port)]
            r = run_pair(ctx, "redis", transport, mode, server, client, port, 120,
                         min_bytes=n, probe=probe, check=check)
            rates = parse(r.output)
            cpu = r.cpu_s / (2 * n) * 1e6
            return [(name, op + " rate", "req/s", True, rates[op], cpu, "us", r.verified)
                    for op in ("SET", "GET")]

        interleave(results, SECTION, ctx.runs, modes, measure,
                   lambda mode, name=name: [(name, op + " rate", "req/s", True, "us")
                                            for op in ("SET", "GET")])
    results.note(SECTION, "redis has no busy-poll for the kernel side: no 'spin' rows.")
    results.note(SECTION, "CPU/op: user+sys of redis-server and redis-benchmark per request.")
