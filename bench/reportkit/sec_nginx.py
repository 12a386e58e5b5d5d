"""wrk against nginx (one worker, a 1 KiB file, keep-alive), both under sanrun or both plain:
requests/s with one connection (defaults and both sleeping) and with 32
(defaults), with the CPU of nginx (master and worker) and wrk per request. wrk's numbers come
from a Lua done() hook (wrk_json.lua); after each run curl must fetch the file byte for byte
over the same transport.
"""
import json
import os
import secrets

from .pair import run_pair
from .procs import Failed, free_port
from .results import interleave

SECTION = "nginx + wrk (HTTP keep-alive, unmodified programs under sanrun)"
HERE = os.path.dirname(os.path.abspath(__file__))

CONF = """worker_processes 1;
daemon off;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {d}/t1; proxy_temp_path {d}/t2; fastcgi_temp_path {d}/t3;
  uwsgi_temp_path {d}/t4; scgi_temp_path {d}/t5;
  server {{ listen 127.0.0.1:{port}; root {d}/html; }}
}}
"""


def prefix(ctx, port, body):
    d = os.path.join(ctx.tmp, "nginx.%d" % port)
    os.makedirs(os.path.join(d, "html"), exist_ok=True)
    with open(os.path.join(d, "html", "index.html"), "w") as f:
        f.write(body)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(CONF.format(d=d, port=port))
    return d


def run(ctx, results):
    seconds = 1 if ctx.quick else 3
    body = secrets.token_hex(512)  # 1 KiB
    plans = [(1, ("default", "sleep")), (32, ("default",))]

    def check(_, probe_out):
        if probe_out != body:
            raise Failed("curl did not get the file nginx serves byte for byte")

    for conns, modes in plans:
        name = "wrk -c %d" % conns

        def measure(transport, mode, run_no, conns=conns, name=name):
            port = free_port()
            d = prefix(ctx, port, body)
            server = ["nginx", "-c", os.path.join(d, "nginx.conf"), "-p", d]
            client = ["wrk", "-t1", "-c", str(conns), "-d", "%ds" % seconds, "-s",
                      os.path.join(HERE, "wrk_json.lua"), "http://127.0.0.1:%d/" % port]
            probe = ["curl", "-s", "http://127.0.0.1:%d/" % port]
            r = run_pair(ctx, "nginx", transport, mode, server, client, port, seconds + 60,
                         min_bytes=10**5, probe=probe, check=check)
            line = [l for l in r.output.splitlines() if l.startswith("{")]
            if not line:
                raise Failed("wrk printed no result line")
            w = json.loads(line[-1])
            if w["requests"] == 0 or w["socket_errors"] or w["non2xx"]:
                raise Failed("wrk: %d requests, %d socket errors, %d non-2xx" % (
                    w["requests"], w["socket_errors"], w["non2xx"]))
            rate = w["requests"] / (w["duration_us"] / 1e6)
            cpu = r.cpu_s / w["requests"] * 1e6
            # Only the rate: wrk's own latency statistics disagree with it (at -c 1 the mean
            # latency times the rate came to 2-2.5 here, where a closed loop gives 1).
            return [(name, "requests", "req/s", True, rate, cpu, "us", r.verified)]

        interleave(results, SECTION, ctx.runs, modes, measure,
                   lambda mode, name=name: [(name, "requests", "req/s", True, "us")])
    results.note(SECTION, "nginx cannot busy-poll: no 'spin' rows. CPU/op: user+sys of nginx "
                 "(master, and its worker reaped at exit) and wrk per request.")
