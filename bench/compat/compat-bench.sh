#!/bin/sh
# compat-bench: the compatibility layer's benchmarks (issue 3). The real programs -- NetPIPE
# (NPtcp -i first), sockperf, iperf3, redis-benchmark, wrk against nginx -- each plain (kernel TCP)
# and under sanrun (both ends SAN) in the same run, interleaved, verified to run on shm, with CPU
# per operation: the application sections of bench/report (docs/bench.md). Then interpose-cost:
# the nanoseconds sanrun adds to calls on kernel fds (not a SAN-vs-TCP figure, so not in the
# report).
# Usage: compat-bench.sh [build dir] [runs] [output dir]   (default build/release, 5 runs, a temp dir)
set -u
B=${1:-build/release}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${3:-$(mktemp -d)}
"$HERE/report" --only nptcp,sockperf,iperf,redis,nginx --build "$B" --runs "${2:-5}" --out "$OUT"
rc=$?
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "== interposition cost on kernel fds (ns per call)"
"$B/bin/interpose-cost" 2000000 > "$TMP/plain"
"$B/bin/sanrun" -- "$B/bin/interpose-cost" 2000000 > "$TMP/pre"
paste "$TMP/plain" "$TMP/pre" | awk -F'\t' '{ n = split($1, a, " "); split($2, b, " ");
  printf "%-26s plain %7s ns  sanrun %7s ns  added %6.1f ns\n", a[1], a[n-1], b[n-1], b[n-1] - a[n-1] }'
exit $rc
