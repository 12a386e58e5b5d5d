"""What the report's header says of the run: commit, date, machine (CPUs, model, kernel), load
before and after, and the command line, so that every figure names where it came from."""
import datetime
import os
import platform
import subprocess


def commit(repo):
    try:
        sha = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (sha or "unknown") + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def today():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def header(repo, argv, load_before, started, quick):
    now = datetime.datetime.now(datetime.timezone.utc)
    return "\n".join([
        "# sanlib benchmark report",
        "",
        "| | |",
        "| --- | --- |",
        "| commit | `%s` |" % commit(repo),
        "| date | %s UTC (%.0f s) |" % (now.strftime("%Y-%m-%d %H:%M"),
                                        (now - started).total_seconds()),
        "| machine | %d CPUs (%s), Linux %s %s |" % (os.cpu_count() or 0, cpu_model(),
                                                  platform.release(), platform.machine()),
        "| load average (1, 5, 15 min) | before %s; after %s |" % (load_before, load()),
        "| command | `%s`%s |" % (" ".join(argv), " (quick: fewer runs, shorter)" if quick else ""),
        "| placement | servers pinned to CPU 0, clients to CPU 1 (taskset), where there are 2 CPUs |",
        "",
        "Every figure is the **median over the runs, [min..max]** beside it; SAN and kernel TCP "
        "runs alternate (SAN, TCP, SAN, TCP ...). **SAN vs TCP** is how many times better SAN's "
        "median is (> 1: SAN better, < 1: worse). **CPU/op** is user+system CPU of both "
        "processes (client and server, every thread, from wait4 or /proc) per operation in the "
        "unit shown. **SAN verified** says how the row was checked to run over shared memory; "
        "a SAN run that was not on shm, or whose bytes did not compare, is printed **FAILED**, "
        "never as a SAN figure. Raw data: `results.json`, `samples.csv`, `raw/`.",
    ])
