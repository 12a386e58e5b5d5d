"""gnuplot figures of the report: per section, one bar per row of how many times better SAN's
median is than TCP's (log scale, the line at 1 is parity). Without gnuplot the report says so
and has its tables all the same.
"""
import os
import shutil
import subprocess


def available():
    return shutil.which("gnuplot") is not None


def advantage_chart(rows, title, png):
    """Writes png (and its .dat and .gp beside it); returns False when nothing could be drawn."""
    data = [(r.name + " " + r.mode + " " + r.metric, r.advantage()) for r in rows
            if not r.failed() and r.advantage()]
    if not data or not available():
        return False
    base = os.path.splitext(png)[0]
    with open(base + ".dat", "w") as f:
        for i, (label, v) in enumerate(data):
            f.write('%d "%s" %.6g\n' % (i, label.replace('"', "'"), v))
    width = max(640, 60 * len(data) + 200)
    script = """set terminal pngcairo size %d,480 noenhanced font ",9"
set output "%s"
set title "%s: SAN vs kernel TCP (median; > 1: SAN better)"
set logscale y 2
set style fill solid 0.6
set boxwidth 0.7
set xtics rotate by -35 left
set grid ytics
set bmargin 9
set ylabel "times better than TCP"
unset key
plot "%s" using 1:3:xtic(2) with boxes lc rgb "#2060a0", 1 with lines lc rgb "#a02020" lw 2
""" % (width, png, title, base + ".dat")
    with open(base + ".gp", "w") as f:
        f.write(script)
    r = subprocess.run(["gnuplot", base + ".gp"], capture_output=True, timeout=60)
    return r.returncode == 0 and os.path.exists(png)
