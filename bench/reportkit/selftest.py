#!/usr/bin/python3
"""ctest bench_report_selftest: that bench/report writes its files and fails a SAN row that did
not run on shm. Not a timed test: it checks files and verdicts, never figures.

  1. the pure parts: the SAN_REPORT check on made-up lines, the table's FAILED cell;
  2. bench/report --only iperf --runs 1 --quick: exit 0, report.md, results.json, samples.csv,
     the SAN row verified as shm;
  3. the same with SAN_PROVIDER=off in the environment (sanrun's programs then use kernel TCP):
     exit 1 and the SAN row FAILED as not on shm.
Usage: selftest.py <build dir>. Exit 77 (skipped) without iperf3.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(HERE))
from reportkit import markdown, results, sanpath  # noqa: E402
from reportkit.procs import Failed  # noqa: E402

LINE = ("pid={pid} prog={prog} shm_connections={shm} tcp_connections={tcp} shm_bytes_sent=0 "
        "shm_bytes_received={got} verbs_connections=0\n")


def expect(cond, what):
    if not cond:
        print("FAILED: " + what)
        sys.exit(1)
    print("ok: " + what)


def check_sanpath(tmp):
    path = os.path.join(tmp, "r")
    with open(path, "w") as f:
        f.write(LINE.format(pid=1, prog="srv", shm=1, tcp=0, got=5000))
        f.write(LINE.format(pid=2, prog="cli", shm=1, tcp=0, got=5000))
        f.write(LINE.format(pid=3, prog="sh", shm=0, tcp=0, got=0))
    expect("shm: 2 procs" in sanpath.verify(path, 2, 10000), "two shm processes verify")
    for bad, why in ((LINE.format(pid=4, prog="x", shm=0, tcp=1, got=0), "a kernel-TCP process"),):
        with open(path, "a") as f:
            f.write(bad)
        try:
            sanpath.verify(path, 2, 1)
            expect(False, why + " fails the row")
        except Failed:
            expect(True, why + " fails the row")
    try:
        sanpath.verify(os.path.join(tmp, "none"), 2)
        expect(False, "a missing report fails the row")
    except Failed:
        expect(True, "a missing report fails the row")
    res = results.Results()
    res.fail("s", "n", "default", "san", "not on shm: test", [("m", "us", False, "us")])
    res.add("s", "n", "default", "tcp", 0, "m", "us", False, 10.0, 1.0, "us")
    expect("**FAILED**" in markdown.table(res.in_section("s")), "a SAN failure prints FAILED")


def run_report(build, out, env):
    argv = [os.path.join(os.path.dirname(HERE), "report"), "--only", "iperf", "--quick", "--runs",
            "1", "--build", build, "--out", out]
    return subprocess.run(argv, env=env, capture_output=True, timeout=300).returncode


def main():
    build = os.path.abspath(sys.argv[1])
    if not shutil.which("iperf3"):
        print("iperf3 not installed: skipped")
        return 77
    tmp = tempfile.mkdtemp()
    try:
        check_sanpath(tmp)
        env = dict(os.environ)
        env.pop("SAN_PROVIDER", None)
        good = os.path.join(tmp, "good")
        expect(run_report(build, good, env) == 0, "bench/report --only iperf exits 0")
        for name in ("report.md", "results.json", "samples.csv"):
            expect(os.path.isfile(os.path.join(good, name)), name + " written")
        rows = json.load(open(os.path.join(good, "results.json")))
        expect(any(v.startswith("shm:") for r in rows for v in r["verified"]["san"]),
               "the SAN row is verified as shm")
        env["SAN_PROVIDER"] = "off"
        bad = os.path.join(tmp, "bad")
        expect(run_report(build, bad, env) == 1, "with SAN_PROVIDER=off bench/report exits 1")
        text = open(os.path.join(bad, "report.md")).read()
        expect("**FAILED**" in text and "not on shm" in text, "and the SAN row is FAILED, not on shm")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
