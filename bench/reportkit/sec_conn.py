"""Connection set-up (conn-bench.sh, bench/conn): connections/s of connect + 1-byte echo + close
loops, SAN against kernel TCP, interleaved by conn-bench.sh itself, read from its runs.csv; the
CPU per connection it measures (wait4 of clients and server) goes beside each rate. Both SAN
set-ups are shown: eager (the default, shm channel in connect()) and late (SAN_SETUP=late, kernel
TCP first, moved to shm later). An eager SAN run that counted errors, or whose 'on shm' share is
below what sanlib's fd budget admits (100 % unless its connections at once need more channels
than the budget allows), fails here; with the late set-up a churn connection never lives long
enough to move, so its rows are checked for errors only and say so.
"""
import csv
import os
import re

from . import profile
from .procs import run as run_prog

SECTION = "connection set-up (conn-bench: connect, echo, close)"
# Figures where more is better: rates, and connections held per GiB ("1/GiB"), which the report
# printed as a cost until 2026-11-27 (its SAN vs TCP column inverted).
RATE_UNITS = ("1/s", "req/s", "1/GiB")
TEXT = ""


def run(ctx, results):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for setup in ("eager", "late"):
        # redis-benchmark -k 0 (issue 17's third short-connection workload) with sanrun's default,
        # late, only: with the eager set-up it takes many minutes.
        only = "churn" if ctx.quick else "churn,hold,nginx" + (",redis" if setup == "late" else "")
        out = os.path.join(ctx.out, "raw", "conn-%s" % setup)
        # At most 3 runs: a full conn-bench.sh run of every workload takes minutes per run.
        argv = [os.path.join(here, "conn", "conn-bench.sh"), "--build", ctx.build, "--only", only,
                "--runs", str(min(ctx.runs, 3)), "--out", out]
        argv += ["--seconds", "1", "--connections", "2000"] if ctx.quick else []
        p = run_prog(argv, 3000, env={"SAN_SETUP": setup})
        with open(ctx.log("conn-%s" % setup), "wb") as f:
            f.write(p.output)
        try:
            rows = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
        except OSError:
            rows = []
        if not rows:
            results.fail(SECTION, "conn-bench (%s)" % setup, "default", "san",
                         "conn-bench.sh exited %s with no runs.csv" % p.status,
                         [("conn/s", "1/s", True, "us")])
            continue
        add(results, setup, rows, fd_budget(out))
        add_failures(results, setup, rows, os.path.join(out, "summary.csv"))
    profile_below_tcp(ctx, results)
    results.note(SECTION, "Known causes: the eager set-up builds a shm channel inside connect() "
                 "and costs several TCP connections' CPU each; the late set-up costs what TCP "
                 "costs plus the socket table, the candidate's bookkeeping and the connection "
                 "thread (profiles above, for each set-up with a row below TCP; docs/bench.md).")
    results.note(SECTION, "CPU/op: user+sys of client and server processes per connection "
                 "(conn-bench, wait4). Late set-up rows are sanlib present as sanrun runs it, "
                 "not figures of shm: 'verified' gives the share of their connections that ended "
                 "on shm (conn-bench's SAN_REPORT count) and why the rest stayed on kernel TCP; "
                 "they fail only on errors.")


# The fds an eager channel holds in each process (sanlib/socket/fd_budget.h: kFdsPerChannel, and
# kFdsPerHoldersPipe for the fork-holder pipe every channel made at connect or accept has):
# channels are made while they hold less than a quarter of the process's fd limit. A channel the
# late set-up moved has no pipe until a fork shares it: 5.
FDS_PER_CHANNEL = 7


def fd_budget(out):
    """How many channels the fd budget admits per process under the fd limit conn-bench.sh ran
    with (its fd-limit file; wrk and conn-bench have that limit, nginx a higher one), or None."""
    try:
        limit = int(open(os.path.join(out, "fd-limit")).read().strip())
    except (OSError, ValueError):
        return None
    return limit // 4 // FDS_PER_CHANNEL


def admitted_share(workload, budget):
    """The share of a workload's connections the fd budget lets reach shm: all of them unless it
    holds more at once (n=, or c= connections of one client) than the budget's channels."""
    m = re.search(r"\b[nc]=(\d+)", workload)
    if not budget or not m or int(m.group(1)) <= budget:
        return 100.0
    return 100.0 * budget / int(m.group(1))


# What a late row's shm share means, by workload: a late row is sanlib present (sanrun's default),
# not a figure of shm, and says how much of it ran on shm.
LATE_SHARE = {
    "churn": "errors = 0; too short to move, by design",
    "hold": "errors = 0; idle, then one echo each: a moment of use after an idle spell does not "
            "move (each end tries only once in use for the delay)",
    "nginx": "errors = 0; close rows too short to move, keep-alive rows move up to the fd "
             "budget (a quarter of the fd limit, 5 fds per moved channel)",
    "redis": "errors = 0; too short to move, by design",
}


# Why each set-up's rows below TCP cost what they cost, as found when the profile was added.
PROFILE_FINDINGS = {
    "eager": "the profile showed the shm channel itself, not the protocol: about a quarter of the "
             "samples under its teardown (`~ShmEndpoint`: munmap, TLB shootdowns to the other "
             "CPU), a sixth in first-touch page faults on its fresh shared memory "
             "(`shmem_fault`), and the close of its memfd. The late set-up rows show the cost "
             "without the eager shm channel.",
    "late": "the kernel's TCP work filled the profile and none of sanlib's calls reached the "
            "5 % listed: a late connection that ends before its move is a kernel TCP connection "
            "plus sanlib's bookkeeping: the socket table entry, the candidate's state "
            "(`LateUpgrade`, one allocation), the data calls' locks and counters, and the kernel "
            "events settled around them. An A/B of nginx `Connection: close` at -c 32 (one 3 s "
            "round each, 2026-11-26) put interposition alone (SAN_PROVIDER=off) at 0.99x TCP and "
            "the late candidates' bookkeeping at about 5 % more (0.95x; CPU per request 65.3 us "
            "TCP, 66.0 us interposed, 69.9 us late). The `hold` rows are another matter: their "
            "'echo all' is every one of thousands of idle connections due to move at once, which "
            "a churn profile does not show: each upper end's first call dials its peer's private "
            "rendezvous (refused while the peer waits its turn behind 64 moves in flight, as it "
            "did then: the sides open are bounded by the fd budget only since), and "
            "the few that move build a channel each. Since bbec6b3 no call waits for the peer's "
            "answer (a bulk transfer excepted): before, 0.4-1.9 s against TCP's 0.08 s; after, "
            "0.20-0.29 s in single runs (2026-11-27). Since 433318a an upper end dials only once "
            "its connection has been in use for the delay, so the idle connections' one echo "
            "stays TCP: echo all 1.17-1.81x TCP's time against 2.04-3.39x before, CPU per "
            "connection 1.21-1.53x against 1.51-1.88x (three interleaved rounds, 2026-11-28). "
            "Since 7c98efe the lower end too tries only once in use (it opened its side from "
            "its connection thread at the delay, idle or not): an idle candidate queues nothing "
            "and costs no CPU while idle (an idle server holding 1,000: 48-54 ms CPU a second "
            "before, 3-4 after; TCP 0-1).",
}


def profile_below_tcp(ctx, results):
    """Each set-up whose connections cost more than TCP's: where one churn client's CPU goes."""
    global TEXT
    for setup in ("eager", "late"):
        below = [r for r in results.in_section(SECTION) if r.name.endswith("(%s)" % setup)
                 and not r.failed() and (r.advantage() or 1) < 1]
        if not below:
            continue
        tag = "conn-%s" % setup
        text = profile.top_symbols(ctx, tag, [
            ctx.bin("conn-bench"), "churn", "--transport", "san", "--clients", "1", "--seconds",
            "1", "--runs", "1"], {"SAN_SETUP": setup})
        TEXT += ("%s set-up, rows below TCP (%s): a profile of one `conn-bench churn --transport "
                 "san --clients 1` run with SAN_SETUP=%s (perf; the share of samples under each "
                 "call, children included; the full report is `raw/%s.profile.txt`):\n\n"
                 "```\n%s\n```\n\nWhen this was written %s\n\n"
                 % (setup.capitalize(), ", ".join(sorted({r.name for r in below})), setup, tag,
                    text, PROFILE_FINDINGS[setup]))


def add_failures(results, setup, rows, summary):
    """conn-bench.sh's FAILED rows (a hung or crashed run: no figures in runs.csv) fail every
    metric the workload has in the other transport's rows."""
    try:
        failed = [r for r in csv.DictReader(open(summary)) if r["metric"] == "FAILED"]
    except OSError:
        return
    for f in failed:
        t = "san" if f["unit"] == "san" else "tcp"
        metrics = {(r["metric"], r["unit"]) for r in rows if r["workload"] == f["workload"]
                   and r["metric"] not in ("errors", "on shm") and not r["metric"].startswith("cpu")}
        results.fail(SECTION, "%s (%s)" % (f["workload"], setup), "default", t,
                     "conn-bench.sh: " + f["note"],
                     [(m, u, u in RATE_UNITS, "us") for m, u in sorted(metrics)] or
                     [("run", "-", False, "us")])


def shared_metrics(rows):
    """conn-bench.sh records redis's CPU and error lines once for both commands ('redis -k 0
    SET+GET'): they belong to the SET row and the GET row alike."""
    out = []
    for r in rows:
        if r["workload"].endswith(" SET+GET"):
            base = r["workload"][:-len("SET+GET")]
            out += [dict(r, workload=base + "SET"), dict(r, workload=base + "GET")]
        else:
            out.append(r)
    return out


def add(results, setup, rows, budget):
    runs = {}
    for r in shared_metrics(rows):
        runs.setdefault((r["workload"], r["transport"], r["run"]), {})[r["metric"]] = r
    for (workload, transport, run_no), metrics in sorted(runs.items()):
        t = "san" if transport == "san" else "tcp"
        cpu = next((float(m["value"]) for k, m in metrics.items() if k.startswith("cpu")), None)
        errors = float(metrics["errors"]["value"]) if "errors" in metrics else 0
        shm = float(metrics["on shm"]["value"]) if "on shm" in metrics else None
        name = "%s (%s)" % (workload, setup)
        problem = None
        admitted = admitted_share(workload, budget)
        if errors:
            problem = "%d errors" % errors
        # Below the budget's share by more than a few connections (a client's extra ones, the
        # budget's check racing between threads) is a failure; below 100 % when all fit, too.
        elif (t == "san" and setup == "eager" and shm is not None
              and shm < admitted - (0.01 if admitted >= 100 else 0.5)):
            problem = "only %.2f %% of SAN connections on shm" % shm
            if admitted < 100:
                problem += " (the fd budget admits %.2f %%)" % admitted
        ver = ""
        if t == "san":
            ver = "on shm: %.2f %%" % shm if shm is not None else "errors = 0"
            if setup == "late" and shm is not None:
                ver += "; " + LATE_SHARE.get(workload.split()[0], "late set-up")
            elif shm is not None and admitted < 100:
                ver += ("; all the fd budget admits (%d channels: a quarter of the fd limit, %d "
                        "fds each); the rest kernel TCP" % (budget, FDS_PER_CHANNEL))
        for metric, m in metrics.items():
            if metric in ("errors", "on shm") or metric.startswith("cpu"):
                continue
            hb = m["unit"] in RATE_UNITS
            if problem:
                results.fail(SECTION, name, "default", t, problem,
                             [(metric, m["unit"], hb, "us")])
            else:
                results.add(SECTION, name, "default", t, int(run_no), metric, m["unit"], hb,
                            float(m["value"]), cpu, "us", ver)
