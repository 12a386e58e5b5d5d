#!/bin/sh
# compat-bench: the compatibility layer's benchmarks (issue 3), each real program run plain (kernel
# TCP) and under sanrun (both ends SAN) in the same run, with the ratio:
#   NPtcp     one-way latency (us) at 4 B .. 1 KiB and bandwidth (MB/s) at 64 KiB+
#   sockperf  ping-pong latency (us), fixed message rate
#   redis     redis-benchmark -t get,set requests/s (-c 1 and -c 50)
#   nginx     wrk against nginx (one worker, a small static file) requests/s (-c 1 and -c 32)
#   cost      interpose-cost: ns added to calls on kernel fds
# Usage: compat-bench.sh <build dir>   (e.g. build/release). Prints; never fails on a slow machine.
set -u
B=${1:-build/release}
SANRUN="$B/bin/sanrun"
PORT=$((20000 + $$ % 20000))
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; pkill -P $$ 2>/dev/null' EXIT

# np <run prefix>: NPtcp latency/bandwidth table into $TMP/np.<tag>
np() {
  tag=$1; shift
  PORT=$((PORT + 1))
  "$@" NPtcp -P $PORT -u 1048576 > /dev/null 2>&1 &
  rx=$!
  sleep 0.5
  "$@" NPtcp -h 127.0.0.1 -P $PORT -u 1048576 -o "$TMP/np.$tag" > /dev/null 2>&1
  wait $rx 2>/dev/null
}
# sp <run prefix>: sockperf ping-pong summary latency
sp() {
  PORT=$((PORT + 1))
  "$@" sockperf sr --tcp -i 127.0.0.1 -p $PORT > /dev/null 2>&1 &
  srv=$!
  sleep 0.5
  "$@" sockperf pp --tcp -i 127.0.0.1 -p $PORT -t 3 --mps 50000 2>&1 |
    sed -n 's/.*Summary: Latency is \([0-9.]*\).*/\1/p'
  kill $srv 2>/dev/null; wait $srv 2>/dev/null
}
# rb <clients> <run prefix>: redis-benchmark SET and GET requests/s
rb() {
  clients=$1; shift
  PORT=$((PORT + 1))
  "$@" redis-server --port $PORT --save "" --appendonly no > /dev/null 2>&1 &
  srv=$!
  sleep 0.7
  "$@" redis-benchmark -p $PORT -t set,get -n 100000 -c "$clients" -q 2>/dev/null | tr '\r' '\n' |
    sed -n 's/^\(SET\|GET\): \([0-9.]*\) requests per second.*/\1 \2/p' | tr '\n' ' '
  "$@" redis-cli -p $PORT shutdown nosave > /dev/null 2>&1; wait $srv 2>/dev/null
}
# wr <connections> <run prefix>: wrk requests/s against an nginx started with the same prefix
wr() {
  conns=$1; shift
  PORT=$((PORT + 1))
  d="$TMP/nginx.$PORT"
  mkdir -p "$d/html" "$d/logs"
  echo hello > "$d/html/index.html"
  cat > "$d/nginx.conf" <<EOF
worker_processes 1;
daemon off;
error_log $d/logs/error.log;
pid $d/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $d/t1; proxy_temp_path $d/t2; fastcgi_temp_path $d/t3;
  uwsgi_temp_path $d/t4; scgi_temp_path $d/t5;
  server { listen 127.0.0.1:$PORT; root $d/html; }
}
EOF
  "$@" nginx -c "$d/nginx.conf" -p "$d" > /dev/null 2>&1 &
  srv=$!
  sleep 0.7
  "$@" wrk -t1 -c "$conns" -d 3s "http://127.0.0.1:$PORT/" 2>/dev/null |
    sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p'
  kill $srv 2>/dev/null; wait $srv 2>/dev/null
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a > 0) printf "%.2fx", a / b; else print "-" }'; }

echo "== NPtcp (one-way latency us / bandwidth MB/s), plain vs sanrun"
np tcp env
np san "$SANRUN" --
printf "%10s %14s %14s %8s   %14s %14s %8s\n" bytes tcp_us san_us speedup tcp_MBps san_MBps ratio
join "$TMP/np.tcp" "$TMP/np.san" 2>/dev/null | awk '{
  # NPtcp columns: bytes, Mbps, seconds (per one-way message)
  if ($1 == 1 || $1 == 4 || $1 == 64 || $1 == 1024 || $1 == 65536 || $1 == 262144 || $1 == 1048576 ||
      $1 == 16 || $1 == 256 || $1 == 4096 || $1 == 16384)
    printf "%10d %14.2f %14.2f %7.1fx   %14.1f %14.1f %7.2fx\n", $1, $3 * 1e6, $5 * 1e6,
      ($5 > 0 ? $3 / $5 : 0), $2 / 8, $4 / 8, ($2 > 0 ? $4 / $2 : 0) }'

echo "== sockperf ping-pong, 50000 msg/s, average latency (us)"
t=$(sp env); s=$(sp "$SANRUN" --)
echo "tcp $t  san $s  speedup $(ratio "$t" "$s")"

for c in 1 50; do
  echo "== redis-benchmark -c $c (requests/s)"
  t=$(rb $c env); s=$(rb $c "$SANRUN" --)
  echo "tcp: $t"
  echo "san: $s"
done

if command -v nginx > /dev/null && command -v wrk > /dev/null; then
  for c in 1 32; do
    echo "== wrk -c $c against nginx (requests/s)"
    t=$(wr $c env); s=$(wr $c "$SANRUN" --)
    echo "tcp $t  san $s  ratio $(ratio "$s" "$t")"
  done
fi

echo "== interposition cost on kernel fds (ns per call)"
"$B/bin/interpose-cost" 2000000 > "$TMP/plain"
"$SANRUN" -- "$B/bin/interpose-cost" 2000000 > "$TMP/pre"
paste "$TMP/plain" "$TMP/pre" | awk -F'\t' '{ n = split($1, a, " "); split($2, b, " ");
  printf "%-26s plain %7s ns  sanrun %7s ns  added %6.1f ns\n", a[1], a[n-1], b[n-1], b[n-1] - a[n-1] }'
