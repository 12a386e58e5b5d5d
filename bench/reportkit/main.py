"""bench/report's driver: parses the command line, runs each section in turn (each one a module
sec_*.py with SECTION and run(ctx, results)), and writes report.md, results.json, samples.csv
and the plots into the output directory. Exit status 1 when any row FAILED, 2 on bad usage.
"""
import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

from . import machine, markdown, pair, plot, procs, results
from . import (sec_conn, sec_drpc, sec_ftp, sec_iperf, sec_nginx, sec_nptcp, sec_proc,
               sec_redis, sec_rpc, sec_sanbench, sec_sockperf)

# The one list of sections, in the report's order.
SECTIONS = [sec_sanbench, sec_sockperf, sec_nptcp, sec_iperf, sec_redis, sec_nginx, sec_rpc,
            sec_ftp, sec_drpc, sec_conn, sec_proc]
NAMES = {m.__name__.rsplit(".", 1)[1][4:]: m for m in SECTIONS}


def parse(argv, repo):
    p = argparse.ArgumentParser(prog="bench/report", description=(
        "Runs the toolkit's benchmarks, each against kernel TCP in the same run, and writes one "
        "Markdown report with tables, plots and the raw data."))
    p.add_argument("--quick", action="store_true", help="2 runs per figure, short runs "
                   "(a few minutes)")
    p.add_argument("--build", default=os.path.join(repo, "build", "release"),
                   help="build tree with bin/ (default build/release)")
    p.add_argument("--out", help="output directory (default docs/results/<date>-<commit>)")
    p.add_argument("--runs", type=int, help="runs per figure (default 2 quick, 5 full)")
    p.add_argument("--only", help="comma-separated sections: " + ",".join(NAMES))
    a = p.parse_args(argv)
    if a.only and any(s not in NAMES for s in a.only.split(",")):
        p.error("--only takes " + ",".join(NAMES))
    return a


def main(argv, repo):
    a = parse(argv, repo)
    started = datetime.datetime.now(datetime.timezone.utc)
    build = os.path.abspath(a.build)
    if not os.path.isfile(os.path.join(build, "bin", "sanrun")):
        print("bench/report: %s/bin/sanrun not built" % build, file=sys.stderr)
        return 2
    out = os.path.abspath(a.out or os.path.join(
        repo, "docs", "results", "%s-%s" % (machine.today(), machine.commit(repo))))
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    runs = a.runs or (2 if a.quick else 5)
    load_before = machine.load()
    tmp = tempfile.mkdtemp(prefix="san-report.", dir="/dev/shm" if os.path.isdir("/dev/shm")
                           else None)
    os.chmod(tmp, 0o755)  # servers that drop privileges (nginx's worker, vsftpd) read files here
    ctx = pair.Context(build, out, tmp, a.quick, runs)
    procs.become_subreaper()
    res = results.Results()
    chosen = [NAMES[s] for s in a.only.split(",")] if a.only else SECTIONS
    try:
        for sec in chosen:
            t0 = time.monotonic()
            print("== %s" % sec.SECTION, flush=True)
            try:
                sec.run(ctx, res)
            except Exception as e:  # a broken section is a FAILED row, the others still run
                traceback.print_exc()
                res.fail(sec.SECTION, "section", "-", "san", "the section stopped: %r" % e,
                         [("run", "-", False, "")])
            procs.reap_orphans(0.5)  # what a section's daemons left: not the next one's CPU
            print("   %.0f s" % (time.monotonic() - t0), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plots = {}
    for i, section in enumerate(res.sections()):
        png = "plots/%02d-%s.png" % (i, section.split()[0].lower().strip("(:"))
        os.makedirs(os.path.join(out, "plots"), exist_ok=True)
        if plot.advantage_chart(res.in_section(section), section, os.path.join(out, png)):
            plots.setdefault(section, []).append(png)
    extra = {}
    for sec in chosen:
        if hasattr(sec, "extra_plots"):
            for section, pngs in sec.extra_plots(ctx).items():
                plots.setdefault(section, []).extend(pngs)
        if getattr(sec, "TEXT", ""):
            extra[sec.SECTION] = sec.TEXT
    header = machine.header(repo, ["bench/report"] + argv, load_before, started, a.quick)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown.document(header, res, plots, extra))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res.to_json(), f, indent=1)
    with open(os.path.join(out, "samples.csv"), "w") as f:
        f.write("\n".join(res.sample_csv_lines()) + "\n")
    failed = [r for r in res.rows.values() if r.failed()]
    print("bench/report: %s/report.md (%d rows, %d FAILED)" % (out, len(res.rows), len(failed)))
    return 1 if failed else 0
