"""The report's Markdown: a header naming the commit, machine, load and command, then one table
per section. Every figure is the median over the runs with the range [min..max] beside it; the
CPU column is user+system seconds of both processes (client and server) per operation, in the
row's unit; 'SAN vs TCP' is how many times better SAN's median is (>1: SAN better).
"""
from .results import MODES


def fig(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return "{:,.0f}".format(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.3g" % v


def spread(values):
    if not values:
        return "-"
    s = sorted(values)
    mid = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    if len(s) == 1:
        return fig(mid)
    return "%s [%s..%s]" % (fig(mid), fig(s[0]), fig(s[-1]))


def ratio(v):
    return "-" if v is None else ("%.2fx" % v if v < 10 else "%.1fx" % v)


def table(rows):
    out = ["| benchmark | mode | figure | SAN | TCP | SAN vs TCP | CPU/op SAN | CPU/op TCP | "
           "SAN verified |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        san = spread(r.values("san"))
        if r.failures["san"]:
            san = "**FAILED** (%d of %d runs): %s" % (
                len(r.failures["san"]), len(r.failures["san"]) + len(r.samples["san"]),
                r.failures["san"][0])
        tcp = spread(r.values("tcp"))
        if r.failures["tcp"]:
            tcp = "**FAILED**: %s" % r.failures["tcp"][0]
        adv = "-" if r.failures["san"] else ratio(r.advantage())
        cpu_unit = (" " + r.cpu_unit) if r.cpu_unit else ""
        cs, ct = r.cpu_median("san"), r.cpu_median("tcp")
        ver = "; ".join(sorted(r.verified["san"])[:1]) or "-"
        out.append("| %s | %s | %s (%s%s) | %s | %s | %s | %s | %s | %s |" % (
            r.name, r.mode, r.metric, r.unit, ", higher is better" if r.higher_better else "",
            san, tcp, adv, fig(cs) + (cpu_unit if cs is not None else ""),
            fig(ct) + (cpu_unit if ct is not None else ""), ver))
    return "\n".join(out)


def modes_legend():
    return "\n".join("- `%s`: %s" % (k, v) for k, v in MODES.items() if k != "-")


def headlines(results):
    """One line per section: its first figure's SAN-vs-TCP ratio in every mode it ran, so that no
    ratio is quoted without the mode it was taken in."""
    out = ["## Headlines", "",
           "The first figure of each section, SAN vs TCP (> 1: SAN better) in each mode it ran; "
           "CPU/op SAN : TCP beside it.", "",
           "| section | figure | defaults | both sleep | both spin |", "| --- | --- | --- | --- | --- |"]
    for section in results.sections():
        rows = results.in_section(section)
        first = rows[0]
        cells = []
        for mode in ("default", "sleep", "spin"):
            # A one-mode row ('-': no spinning involved) is the defaults' figure.
            r = next((x for x in rows if (x.name, x.metric) == (first.name, first.metric)
                      and (x.mode == mode or (x.mode == "-" and mode == "default"))), None)
            if r is None:
                cells.append("not run" if mode != "spin" else "-")
            elif r.failures["san"]:
                cells.append("**FAILED**")
            else:
                cs, ct = r.cpu_median("san"), r.cpu_median("tcp")
                cpu = " (CPU %s : %s %s)" % (fig(cs), fig(ct), r.cpu_unit) if (
                    cs is not None and ct is not None) else ""
                cells.append(ratio(r.advantage()) + cpu)
        out.append("| %s | %s %s | %s |" % (section.split(" (")[0], first.name, first.metric,
                                             " | ".join(cells)))
    return "\n".join(out)


def below_kernel(results):
    """Every row whose SAN median is worse than TCP's: the issue asks that each be looked at."""
    rows = [r for key, r in results.rows.items() if not r.failed() and r.advantage() is not None
            and r.advantage() < 1]
    if not rows:
        return "## Rows where SAN is below the kernel\n\nNone in this run.\n"
    out = ["## Rows where SAN is below the kernel", "",
           "Each is a place to look; where its cause is known, the section's notes say it.", ""]
    for r in rows:
        out.append("- %s: %s, %s %s: %s (SAN %s vs TCP %s %s)" % (
            r.section.split(" (")[0], r.name, r.mode, r.metric, ratio(r.advantage()),
            fig(r.median("san")), fig(r.median("tcp")), r.unit))
    return "\n".join(out) + "\n"


def document(header, results, plots, section_text):
    parts = [header, "", "Modes of the application rows:", modes_legend(), "",
             headlines(results), "", below_kernel(results)]
    for section in results.sections():
        parts.append("## " + section)
        parts.append("")
        if section in section_text:
            parts.append(section_text[section])
            parts.append("")
        parts.append(table(results.in_section(section)))
        parts.append("")
        for n in results.notes.get(section, []):
            parts.append("- " + n)
        if results.notes.get(section):
            parts.append("")
        for png in plots.get(section, []):
            parts.append("![%s](%s)" % (section, png))
            parts.append("")
    return "\n".join(parts) + "\n"
