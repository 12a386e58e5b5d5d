"""gnuplot figures of the report: per section, one bar per row of how many times better SAN's
median is than TCP's, drawn as log2 from the parity line (up: better, down: worse). Without gnuplot the report says so
and has its tables all the same.
"""
import math
import os
import shutil
import subprocess


def available():
    return shutil.which("gnuplot") is not None


def advantage_chart(rows, title, png):
    """Writes png (and its .dat and .gp beside it); returns False when nothing could be drawn."""
    # A ratio that is not positive has no log2: figures of opposite signs, such as a host-wide
    # slab growth measured below zero at a small connection count. Left out of the chart; the
    # tables keep it.
    data = [(r.name + " " + r.mode + " " + r.metric, r.advantage()) for r in rows
            if not r.failed() and r.advantage() and r.advantage() > 0]
    if not data or not available():
        return False
    base = os.path.splitext(png)[0]
    with open(base + ".dat", "w") as f:
        for i, (label, v) in enumerate(data):
            f.write('%d "%s" %.6g %.6g\n' % (i, label.replace('"', "'"), v, math.log2(v)))
    width = max(700, 60 * len(data) + 320)
    logs = [math.log2(v) for _, v in data]
    low, high = min(0.0, min(logs)) - 0.3, max(0.0, max(logs)) + 0.3
    # log2 of the ratio from a zero line: up is SAN better, down is SAN worse, and a bar's
    # length is how many times (a log axis would hang a bar below 1 from the axis's bottom).
    tics = ", ".join('"%s" %d' % ("%gx" % 2.0 ** k if k >= 0 else "1/%dx" % 2 ** -k, k)
                     for k in range(-6, 11))
    script = """set terminal pngcairo size %d,600 noenhanced font ",9"
set output "%s"
set title "%s: SAN vs kernel TCP, median (up: SAN better, down: worse)"
set style fill solid 0.6
set boxwidth 0.7
set xtics rotate by -35 left
set ytics (%s)
set grid ytics
set bmargin 15
set rmargin 30
set yrange [%g:%g]
set ylabel "times better than TCP (log scale)"
set xzeroaxis lt -1 lw 2
unset key
plot "%s" using 1:4:xtic(2) with boxes lc rgb "#2060a0"
""" % (width, os.path.basename(png), title.split(" (")[0], tics, low, high,
       os.path.basename(base) + ".dat")
    with open(base + ".gp", "w") as f:
        f.write(script)
    # Names relative to the plots folder: the committed .gp redraws its png from a clone anywhere
    # (`cd plots && gnuplot X.gp`), not only from the directory the report was made in.
    r = subprocess.run(["gnuplot", os.path.basename(base) + ".gp"], capture_output=True,
                       timeout=60, cwd=os.path.dirname(os.path.abspath(base)))
    return r.returncode == 0 and os.path.exists(png)
