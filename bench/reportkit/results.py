"""The report's figures: every sample of every run, grouped into rows (one benchmark, one mode,
one metric), with the median and range per transport and the CPU each sample cost.

A row is keyed by (section, name, mode, metric). Each sample records its transport ('san' or
'tcp'), the run it came from, the figure, the CPU both processes used per operation, and how the
run was verified; a failed run is recorded as a failure of that row and transport, and a row with
a SAN failure is printed as FAILED, whatever else it holds. Not thread-safe.
"""
import statistics

MODES = {
    "default": "defaults: SAN spins up to SAN_SPIN_US (50 us), kernel sleeps",
    "sleep": "both sleep: SAN_SPIN_US=0, kernel blocking",
    "spin": "both spin: SAN_SPIN_US=10 s, kernel side busy-polls",
    "-": "one mode",
}


class Row:
    def __init__(self, section, name, mode, metric, unit, higher_better, cpu_unit):
        self.section, self.name, self.mode, self.metric = section, name, mode, metric
        self.unit, self.higher_better, self.cpu_unit = unit, higher_better, cpu_unit
        self.samples = {"san": [], "tcp": []}
        self.failures = {"san": [], "tcp": []}
        self.verified = {"san": set(), "tcp": set()}

    def values(self, transport):
        return [s["value"] for s in self.samples[transport]]

    def cpus(self, transport):
        return [s["cpu"] for s in self.samples[transport] if s["cpu"] is not None]

    def median(self, transport):
        v = self.values(transport)
        return statistics.median(v) if v else None

    def cpu_median(self, transport):
        v = self.cpus(transport)
        return statistics.median(v) if v else None

    def failed(self):
        return bool(self.failures["san"] or self.failures["tcp"]) or not (
            self.samples["san"] and self.samples["tcp"])

    def advantage(self):
        """How many times better SAN is than TCP (>1: SAN better), from the medians."""
        s, t = self.median("san"), self.median("tcp")
        if not s or not t:
            return None
        return s / t if self.higher_better else t / s


class Results:
    def __init__(self):
        self.rows = {}
        self.order = []
        self.notes = {}  # section -> list of lines

    def row(self, section, name, mode, metric, unit, higher_better, cpu_unit):
        key = (section, name, mode, metric)
        if key not in self.rows:
            self.rows[key] = Row(section, name, mode, metric, unit, higher_better, cpu_unit)
            self.order.append(key)
        return self.rows[key]

    def add(self, section, name, mode, transport, run, metric, unit, higher_better, value,
            cpu=None, cpu_unit="", verified=""):
        r = self.row(section, name, mode, metric, unit, higher_better, cpu_unit)
        r.samples[transport].append({"run": run, "value": value, "cpu": cpu})
        if verified:
            r.verified[transport].add(verified)

    def fail(self, section, name, mode, transport, reason, metrics):
        """metrics: [(metric, unit, higher_better, cpu_unit)] of the rows the run would have made."""
        for metric, unit, higher_better, cpu_unit in metrics:
            r = self.row(section, name, mode, metric, unit, higher_better, cpu_unit)
            r.failures[transport].append(reason)

    def note(self, section, text):
        self.notes.setdefault(section, []).append(text)

    def sections(self):
        seen = []
        for key in self.order:
            if key[0] not in seen:
                seen.append(key[0])
        return seen

    def in_section(self, section):
        return [self.rows[k] for k in self.order if k[0] == section]

    def any_failed(self):
        return any(r.failed() for r in self.rows.values())

    def to_json(self):
        out = []
        for key in self.order:
            r = self.rows[key]
            out.append({"section": r.section, "name": r.name, "mode": r.mode, "metric": r.metric,
                        "unit": r.unit, "higher_is_better": r.higher_better,
                        "cpu_unit": r.cpu_unit, "samples": r.samples, "failures": r.failures,
                        "verified": {t: sorted(v) for t, v in r.verified.items()}})
        return out

    def sample_csv_lines(self):
        yield "section,name,mode,metric,unit,transport,run,value,cpu,cpu_unit"
        for key in self.order:
            r = self.rows[key]
            for t in ("san", "tcp"):
                for s in r.samples[t]:
                    yield ",".join(str(x) for x in (
                        r.section, r.name, r.mode, r.metric, r.unit, t, s["run"], s["value"],
                        "" if s["cpu"] is None else s["cpu"], r.cpu_unit))


def interleave(results, section, runs, modes, measure, expected):
    """Runs measure(transport, mode, run) for run in range(runs), mode in modes, transport in
    (san, tcp): SAN and TCP alternate, in ABBA order (SAN first in even runs, TCP first in odd
    ones), so drift on the machine hits both alike and neither is always second. measure returns
    [(name, metric, unit, higher_better, value, cpu, cpu_unit, verified)] or raises Failed;
    expected(mode) lists the (name, metric, unit, higher_better, cpu_unit) a failure spoils."""
    from .procs import Failed
    for run in range(runs):
        for mode in modes:
            for transport in ("san", "tcp") if run % 2 == 0 else ("tcp", "san"):
                try:
                    for (name, metric, unit, hb, value, cpu, cpu_unit, ver) in measure(
                            transport, mode, run):
                        results.add(section, name, mode, transport, run, metric, unit, hb, value,
                                    cpu, cpu_unit, ver)
                except Failed as e:
                    by_name = {}
                    for (name, metric, unit, hb, cpu_unit) in expected(mode):
                        by_name.setdefault(name, []).append((metric, unit, hb, cpu_unit))
                    for name, metrics in by_name.items():
                        results.fail(section, name, mode, transport, str(e), metrics)
                    print("  FAILED %s %s %s run %d: %s" % (section, transport, mode, run, e),
                          flush=True)
