#!/usr/bin/env bash
# conn-bench.sh: the connection benchmark of issue 17 (docs/bench.md, "conn-bench"). Every figure
# is taken over SAN and over kernel TCP in the same run, interleaved (san, tcp, san, tcp, ...),
# and reported as median [min..max] over the runs with the ratio SAN/TCP and the load average:
#   churn   conn-bench churn: connect + 1-byte echo + close per second, 1 and 4 client processes;
#           connect + close alone (--exchange none), 1 client; and against an accept-then-fork
#           server (--server fork), 1 client
#   hold    conn-bench hold: N concurrent connections: fds, memory, set-up time per connection
#   nginx   wrk -H "Connection: close" -c 1 / -c 32 against nginx (daemon off, and daemon on),
#           wrk keep-alive -c 1000 (daemon off); plain vs nginx and wrk both under sanrun
#   redis   redis-benchmark -k 0 -t set,get against redis-server --daemonize yes; plain vs sanrun
# Every server it starts it stops (also on exit or Ctrl-C); every step runs under `timeout`. A step
# that fails or hangs is a FAILED row, and error counts are rows of their own: nothing is hidden.
# Writes summary.csv (one row per figure) and runs.csv (every run) to the output directory.
set -u

usage() {
  cat <<EOF
usage: $0 [options]
  --build DIR        build tree with bin/conn-bench and bin/sanrun (default: build/release)
  --sanrun PATH      the sanrun to use (default: DIR/bin/sanrun)
  --out DIR          where summary.csv, runs.csv and logs go (default: a new mktemp -d)
  --runs N           runs per transport (default 5)
  --only LIST        any of churn,hold,nginx,redis (default all)
  --connections LIST hold: connections at once, one measurement each (default 10000,budget;
                     budget: the most channels the fd budget admits on shm, in hundreds: a
                     quarter of the fd limit, 7 fds each for an eager channel,
                     sanlib/socket/fd_budget.h)
  --seconds S        churn loop and wrk duration per measurement (default 3)
  --requests N       redis-benchmark -n (default 20000)
  --quick            3 runs, 1 s measurements, hold 2000, redis -n 2000: about 2 minutes
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
BUILD="$here/../../build/release"
SANRUN=""
OUT=""
RUNS=5
ONLY="churn,hold,nginx,redis"
CONNS=10000,budget
SECS=3
REQS=20000
QUICK=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift ;;
    --sanrun) SANRUN=$2; shift ;;
    --out) OUT=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --connections) CONNS=$2; shift ;;
    --seconds) SECS=$2; shift ;;
    --requests) REQS=$2; shift ;;
    --quick) QUICK=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "conn-bench.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
if [ "$QUICK" = 1 ]; then RUNS=3; SECS=1; CONNS=2000; REQS=2000; fi
SANRUN=${SANRUN:-$BUILD/bin/sanrun}
CONNBENCH=$BUILD/bin/conn-bench
for tool in "$SANRUN" "$CONNBENCH"; do
  [ -x "$tool" ] || { echo "conn-bench.sh: $tool not found (build it first)" >&2; exit 2; }
done
OUT=${OUT:-$(mktemp -d /tmp/conn-bench.XXXXXX)}
mkdir -p "$OUT" || exit 2
SUMMARY=$OUT/summary.csv
RUNSCSV=$OUT/runs.csv
: > "$SUMMARY"
: > "$RUNSCSV"
TMP=$(mktemp -d /tmp/conn-bench-srv.XXXXXX)
chmod 755 "$TMP"  # nginx workers run as nobody and must read the document root
HZ=$(getconf CLK_TCK)
STATUS=0

# ---- servers: every one started is listed here and stopped on exit ----
PIDFILES=()
stop_pidfile() {  # stop_pidfile FILE: SIGTERM the daemon and its children, SIGKILL after 5 s
  local f=$1 pid kids i
  [ -s "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null)
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 0
  kids=$(pgrep -P "$pid" 2>/dev/null)
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  kill -KILL "$pid" $kids 2>/dev/null
  rm -f "$f"
}
cleanup() {
  local f
  for f in "${PIDFILES[@]}"; do stop_pidfile "$f"; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- helpers ----
load1() { cut -d' ' -f1 /proc/loadavg; }
free_port() {  # a TCP port no socket uses, below the ephemeral range (churn leaves TIME_WAITs)
  local p low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
  [ "${low:-0}" -gt 12000 ] || low=61000
  for _ in $(seq 50); do
    p=$((10000 + RANDOM % (low - 10000)))
    ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null | grep -q . || { echo "$p"; return; }
  done
  echo "$p"
}
cpu_ticks() {  # cpu_ticks PID...: user+system clock ticks of these processes and their children
  local pid all=""
  for pid in "$@"; do all="$all $pid $(pgrep -P "$pid" 2>/dev/null)"; done
  for pid in $all; do cat "/proc/$pid/stat" 2>/dev/null; done |
    awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}
settle() {  # waits (at most 70 s) for TIME_WAIT sockets to drain below 5000: a previous run's
  # connections (SAN's set-up uses several sockets each) would otherwise use up the ephemeral ports
  # of the next and make it fail with EADDRNOTAVAIL
  local i n
  for i in $(seq 70); do
    n=$(ss -Htan state time-wait 2>/dev/null | wc -l)
    [ "$n" -lt 5000 ] && return
    [ "$i" = 1 ] && echo "  (waiting for $n TIME_WAIT sockets to drain)" >&2
    sleep 1
  done
  echo "  still $n TIME_WAIT sockets after 70 s: the next run may fail with EADDRNOTAVAIL" >&2
}
record() {  # record WORKLOAD METRIC UNIT TRANSPORT RUN VALUE LOAD
  echo "$1,$2,$3,$4,$5,$6,$7" >> "$RUNSCSV"
}
failed() {  # failed WORKLOAD TRANSPORT RUN WHY
  echo "$1,FAILED,$2,,,,,,,,,,,,run $3: ${4//,/;}" >> "$OUT/failures.csv"
  echo "  FAILED: $1 $2 run $3: $4" >&2
  STATUS=1
}
wanted() { case ",$ONLY," in *,$1,*) return 0 ;; esac; return 1; }
prefix() {  # the command prefix of a transport
  if [ "$1" = san ]; then echo "$SANRUN --"; else echo "env"; fi
}

# ---- nginx + wrk ----
nginx_start() {  # nginx_start TRANSPORT on|off DIR PORT: starts nginx, echoes its master pid
  local t=$1 daemon=$2 d=$3 port=$4 i
  mkdir -p "$d/html" "$d/logs"
  head -c 1024 /dev/zero | tr '\0' 'x' > "$d/html/index.html"
  cat > "$d/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile 65536;
daemon $daemon;
error_log $d/logs/error.log;
pid $d/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $d/t1; proxy_temp_path $d/t2; fastcgi_temp_path $d/t3;
  uwsgi_temp_path $d/t4; scgi_temp_path $d/t5;
  server { listen 127.0.0.1:$port backlog=4096; root $d/html; }
}
EOF
  PIDFILES+=("$d/nginx.pid")
  if [ "$daemon" = on ]; then
    timeout 10 $(prefix "$t") nginx -c "$d/nginx.conf" -p "$d" > "$d/logs/start.log" 2>&1
  else
    $(prefix "$t") nginx -c "$d/nginx.conf" -p "$d" > "$d/logs/start.log" 2>&1 &
  fi
  for i in $(seq 50); do
    [ -s "$d/nginx.pid" ] && ss -Htln "sport = :$port" | grep -q . && break
    sleep 0.1
  done
  [ -s "$d/nginx.pid" ] && cat "$d/nginx.pid"
}
# wrk_once WORKLOAD TRANSPORT RUN PORT MASTER [wrk options]: one wrk measurement, recorded
wrk_once() {
  local w=$1 t=$2 run=$3 port=$4 master=$5 load before after log rps sockerr non2xx cpu reqs p99
  shift 5
  log=$OUT/logs/$w.$t.$run.wrk
  log=${log// /_}
  load=$(load1)
  before=$(cpu_ticks "$master")
  TIMEFORMAT='%3U %3S'
  rm -f "$log.report"
  { time SAN_REPORT="$log.report" timeout $((SECS + 20)) $(prefix "$t") wrk -t1 -d "${SECS}s" \
      --timeout 5s --latency "$@" "http://127.0.0.1:$port/" > "$log" 2>&1 ; } 2> "$log.time"
  after=$(cpu_ticks "$master")
  rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$log")
  reqs=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$log")
  sockerr=$(sed -n 's/.*Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' "$log" |
    awk '{ print $1 + $2 + $3 + $4 }')
  non2xx=$(sed -n 's/.*Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$log")
  if [ -z "$rps" ]; then
    failed "$w" "$t" "$run" "wrk gave no figure: $(tail -n 2 "$log" | tr '\n' ' ')"
    return
  fi
  record "$w" "req/s" "1/s" "$t" "$run" "$rps" "$load"
  [ "${reqs:-0}" = 0 ] && failed "$w" "$t" "$run" "no request succeeded (socket errors ${sockerr:-0}, non-2xx ${non2xx:-0})"
  record "$w" "errors" "count" "$t" "$run" "$(( ${sockerr:-0} + ${non2xx:-0} ))" "$load"
  # The tail beside the rate: a rate can hide requests left waiting for seconds (an epoll set
  # that starved its kernel fds did: p99 1 s against TCP's 18 ms at a higher rate).
  p99=$(awk '$1 == "99%" { v = $2; u = v; sub(/^[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
    printf "%.3f", v * (u == "s" ? 1000 : u == "us" ? 0.001 : 1) }' "$log")
  [ -n "$p99" ] && record "$w" "p99 latency" "ms" "$t" "$run" "$p99" "$load"
  # wrk's own SAN_REPORT line (sanlib, at exit): the share of its connections that ended on shm
  [ "$t" = san ] && [ -s "$log.report" ] && record "$w" "on shm" "%" "$t" "$run" "$(awk '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
    END { n = v["shm_connections"] + v["tcp_connections"]; printf "%.2f", n ? 100 * v["shm_connections"] / n : 0 }
  ' "$log.report")" "$load"
  [ "${sockerr:-0}" != 0 ] || [ "${non2xx:-0}" != 0 ] &&
    { echo "  ERRORS: $w $t run $run: socket errors ${sockerr:-0}, non-2xx ${non2xx:-0}" >&2; STATUS=1; }
  if [ -n "$reqs" ] && [ "$reqs" -gt 0 ]; then
    cpu=$(awk -v u="$(cat "$log.time")" -v s0="$before" -v s1="$after" -v hz="$HZ" -v n="$reqs" \
      'BEGIN { split(u, a, " "); printf "%.2f", ((s1 - s0) / hz + a[1] + a[2]) * 1e6 / n }')
    record "$w" "cpu/req" "us" "$t" "$run" "$cpu" "$load"
  fi
  echo "  $w $t run $run: $rps req/s, errors: socket ${sockerr:-0} non-2xx ${non2xx:-0}, load $load" >&2
}
nginx_round() {  # nginx_round TRANSPORT RUN DAEMON: start, measure, stop
  local t=$1 run=$2 daemon=$3 port d master
  settle
  port=$(free_port)
  d=$TMP/nginx.$t.$daemon.$run
  master=$(nginx_start "$t" "$daemon" "$d" "$port")
  if [ -z "$master" ]; then
    failed "nginx daemon $daemon" "$t" "$run" "nginx did not start: $(cat "$d/logs/error.log" "$d/logs/start.log" 2>/dev/null | grep -m1 -E 'emerg|alert|error' | cut -c1-200)"
    stop_pidfile "$d/nginx.pid"
    return
  fi
  wrk_once "nginx $daemon close c=1" "$t" "$run" "$port" "$master" -c 1 -H "Connection: close"
  wrk_once "nginx $daemon close c=32" "$t" "$run" "$port" "$master" -c 32 -H "Connection: close"
  if [ "$daemon" = off ]; then
    wrk_once "nginx $daemon keepalive c=1000" "$t" "$run" "$port" "$master" -c 1000
  fi
  stop_pidfile "$d/nginx.pid"
  cp "$d/logs/error.log" "$OUT/logs/nginx.$t.$daemon.$run.error.log" 2>/dev/null
}

# ---- redis ----
redis_round() {  # redis_round TRANSPORT RUN
  local t=$1 run=$2 port d pid load before after log rps_set rps_get errs cpu i limit
  settle
  port=$(free_port)
  d=$TMP/redis.$t.$run
  mkdir -p "$d"
  PIDFILES+=("$d/redis.pid")
  timeout 10 $(prefix "$t") redis-server --daemonize yes --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no --dir "$d" --pidfile "$d/redis.pid" --logfile "$d/redis.log" \
    > /dev/null 2>&1
  for i in $(seq 50); do
    [ -s "$d/redis.pid" ] && ss -Htln "sport = :$port" | grep -q . && break
    sleep 0.1
  done
  pid=$(cat "$d/redis.pid" 2>/dev/null)
  if [ -z "$pid" ]; then
    failed "redis -k 0" "$t" "$run" "redis-server did not start: $(grep -m1 -iE 'error|could not|fail' "$d/redis.log" 2>/dev/null | cut -c1-200)"
    return
  fi
  log=$OUT/logs/redis.$t.$run.log
  limit=$((30 + REQS / 200))
  load=$(load1)
  before=$(cpu_ticks "$pid")
  TIMEFORMAT='%3U %3S'
  { time timeout "$limit" $(prefix "$t") redis-benchmark -p "$port" -k 0 -t set,get -n "$REQS" \
      --csv > "$log" 2>&1 ; } 2> "$log.time"
  local rc=$?
  after=$(cpu_ticks "$pid")
  rps_set=$(sed -n 's/^"SET","\([0-9.]*\)".*/\1/p' "$log")
  rps_get=$(sed -n 's/^"GET","\([0-9.]*\)".*/\1/p' "$log")
  errs=$(tr '\r' '\n' < "$log" | grep -ciE 'error|could not|reset|refused')
  if [ -z "$rps_set" ] || [ -z "$rps_get" ]; then
    failed "redis -k 0" "$t" "$run" "redis-benchmark gave no figure (exit $rc$([ $rc = 124 ] && echo ": timeout after $limit s")): $(tr '\r' '\n' < "$log" | grep -v '^ *$' | tail -n 1)"
  else
    record "redis -k 0 SET" "req/s" "1/s" "$t" "$run" "$rps_set" "$load"
    record "redis -k 0 GET" "req/s" "1/s" "$t" "$run" "$rps_get" "$load"
    cpu=$(awk -v u="$(cat "$log.time")" -v s0="$before" -v s1="$after" -v hz="$HZ" -v n="$((2 * REQS))" \
      'BEGIN { split(u, a, " "); printf "%.2f", ((s1 - s0) / hz + a[1] + a[2]) * 1e6 / n }')
    record "redis -k 0 SET+GET" "cpu/req" "us" "$t" "$run" "$cpu" "$load"
    echo "  redis $t run $run: SET $rps_set GET $rps_get req/s, $errs error lines, load $load" >&2
  fi
  record "redis -k 0 SET+GET" "errors" "lines" "$t" "$run" "$errs" "$load"
  [ "$errs" = 0 ] || { echo "  ERRORS: redis $t run $run: $errs error lines in $log" >&2; STATUS=1; }
  timeout 5 redis-cli -p "$port" shutdown nosave > /dev/null 2>&1
  stop_pidfile "$d/redis.pid"
}

# ---- summary of the real-program runs (same columns as conn-bench --csv) ----
summarize() {
  awk -F, -v SUBSEP2=";" '
    function med(s,   v, n, i, j, x) {
      n = split(s, v, " ")
      for (i = 2; i <= n; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
      lo = v[1]; hi = v[n]
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    function num(x) { return x == "" ? "-" : (x >= 100 ? sprintf("%.0f", x) : sprintf("%.3g", x)) }
    NR == 1 { next }
    $1 !~ /^(churn|hold)/ {
      k = $1 SUBSEP $2
      if (!($1 in wseen)) { wseen[$1] = 1; worder[++nw] = $1 }
      if (!(k in seen)) { seen[k] = 1; mlist[$1] = mlist[$1] SUBSEP2 k; unit[k] = $3 }
      vals[k, $4] = vals[k, $4] " " $6; runs[k, $4]++
      if (!(k in lmin) || $7 < lmin[k]) lmin[k] = $7
      if (!(k in lmax) || $7 > lmax[k]) lmax[k] = $7
    }
    END {
      for (w = 1; w <= nw; w++) {
        m = split(substr(mlist[worder[w]], 2), ks, SUBSEP2)
        for (i = 1; i <= m; i++) order[++n] = ks[i]
      }
      for (i = 1; i <= n; i++) {
        k = order[i]; split(k, p, SUBSEP)
        sm = ""; sl = ""; sh = ""; tm = ""; tl = ""; th = ""; r = ""
        if (runs[k, "san"]) { sm = med(vals[k, "san"]); sl = lo; sh = hi }
        if (runs[k, "tcp"]) { tm = med(vals[k, "tcp"]); tl = lo; th = hi }
        if (sm != "" && tm != "" && tm > 0) r = sprintf("%.2f", sm / tm)
        printf "%s,%s,%s,%s,%s,%s,%d,%s,%s,%s,%d,%s,%s,%s,\n", p[1], p[2], unit[k], num(sm), num(sl), num(sh),
          runs[k, "san"], num(tm), num(tl), num(th), runs[k, "tcp"], r, lmin[k], lmax[k]
      }
    }' "$RUNSCSV"
}
print_table() {
  awk -F, '
    NR == 1 { printf "%-28s %-18s %-28s %-28s %8s  %s\n", "workload", "metric", "SAN median [range]", "TCP median [range]", "SAN/TCP", "load1"; next }
    $2 == "FAILED" { printf "%-28s FAILED %s %s\n", $1, $3, $15; next }
    $2 == "note" { printf "%-28s note: %s\n", $1, $15; next }
    {
      s = $7 > 0 ? $4 " [" $5 ".." $6 "]" : "-"
      t = $11 > 0 ? $8 " [" $9 ".." $10 "]" : "-"
      flag = ($2 == "errors" && ($6 + 0 > 0 || $10 + 0 > 0)) ? "   <== ERRORS" : ""
      printf "%-28s %-18s %-28s %-28s %8s  %s..%s%s\n", $1, $2 " (" $3 ")", s, t, (($12 == "" || $12 == "-") ? "-" : $12 "x"), $13, $14, flag
    }' "$SUMMARY"
}

# ---- the runs ----
mkdir -p "$OUT/logs"
ulimit -Hn 65536 2>/dev/null; ulimit -Sn "$(ulimit -Hn)" 2>/dev/null
ulimit -n > "$OUT/fd-limit"  # the report reads what the fd budget admits from it
# `budget` in --connections: the most connections whose channels all fit in the fd budget
BUDGET_CONNS=$(( $(ulimit -n) / 4 / 7 / 100 * 100 ))
CONNS=${CONNS//budget/$BUDGET_CONNS}
echo "conn-bench.sh: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $RUNS runs per transport" \
  "interleaved san,tcp; ${SECS}s per measurement; fd limit $(ulimit -n); output in $OUT" >&2
echo "  sanrun: $SANRUN; conn-bench: $CONNBENCH (libsan: $(ldd "$CONNBENCH" | awk '/libsan/ { print $3 }'))" >&2
[ "$QUICK" = 1 ] && echo "  --quick: 3 runs (not 5), 1 s measurements, hold $CONNS, redis -n $REQS" >&2

# One conn-bench churn measurement: churn_step ROW LOG TIMEOUT_S conn-bench-options... (ROW names
# the failures.csv row of a timed-out run; its output goes to logs/LOG.txt and LOG.err).
churn_step() {
  local row=$1 log=$2 limit=$3
  shift 3
  timeout "$limit" "$CONNBENCH" churn --runs "$RUNS" --seconds "$SECS" --csv "$SUMMARY" \
    --runs-csv "$OUT/runs-conn.csv" "$@" > "$OUT/logs/$log.txt" 2> "$OUT/logs/$log.err"
  local rc=$?
  cat "$OUT/logs/$log.err" >&2
  [ $rc = 0 ] || { STATUS=1; [ $rc = 124 ] && echo "$row,FAILED,both,,,,,,,,,,,,conn-bench timed out" >> "$OUT/failures.csv"; }
}

if wanted churn; then
  echo "== churn: connect + 1-byte echo + close (conn-bench churn)" >&2
  churn_step churn churn $((RUNS * 2 * 2 * (SECS + 40) + 30)) --clients 1,4
  # The connection alone (no byte exchanged): what a set-up that keeps the kernel connection can
  # at best save is the difference between this and churn c=1.
  churn_step "churn c=1 bare" churn-bare $((RUNS * 2 * (SECS + 40) + 30)) --exchange none --clients 1
  # The accept-then-fork server (a child per connection, which echoes and exits): what sanlib
  # adds to each fork and to each child's short life.
  churn_step "churn c=1 fork" churn-fork $((RUNS * 2 * (SECS + 40) + 30)) --server fork --clients 1
fi
if wanted hold; then
  for n in ${CONNS//,/ }; do
    echo "== hold: $n connections at once (conn-bench hold)" >&2
    timeout $((RUNS * 2 * 200 + 30)) "$CONNBENCH" hold --runs "$RUNS" --connections "$n" \
      --csv "$SUMMARY" --runs-csv "$OUT/runs-conn.csv" > "$OUT/logs/hold-$n.txt" \
      2> "$OUT/logs/hold-$n.err"
    rc=$?
    cat "$OUT/logs/hold-$n.err" >&2
    [ $rc = 0 ] || { STATUS=1; [ $rc = 124 ] && echo "hold n=$n,FAILED,both,,,,,,,,,,,,conn-bench timed out" >> "$OUT/failures.csv"; }
  done
fi
echo "workload,metric,unit,transport,run,value,load1" > "$RUNSCSV"
if wanted nginx; then
  echo "== nginx + wrk (1 worker, 1 KiB file), plain vs both under sanrun" >&2
  for run in $(seq "$RUNS"); do
    for t in san tcp; do
      nginx_round "$t" "$run" off
      nginx_round "$t" "$run" on
    done
  done
fi
if wanted redis; then
  echo "== redis-benchmark -k 0 -t set,get -n $REQS, plain vs both under sanrun" >&2
  for run in $(seq "$RUNS"); do
    for t in san tcp; do redis_round "$t" "$run"; done
  done
fi
summarize >> "$SUMMARY"
[ -s "$OUT/failures.csv" ] && cat "$OUT/failures.csv" >> "$SUMMARY"
if [ "$(head -c 8 "$SUMMARY")" != "workload" ]; then  # no conn-bench rows: add the header
  { echo "workload,metric,unit,san_median,san_min,san_max,san_runs,tcp_median,tcp_min,tcp_max,tcp_runs,ratio,load_min,load_max,note"
    cat "$SUMMARY"; } > "$SUMMARY.tmp" && mv "$SUMMARY.tmp" "$SUMMARY"
fi
[ -s "$OUT/runs-conn.csv" ] && tail -n +2 "$OUT/runs-conn.csv" >> "$RUNSCSV"

echo
echo "== conn-bench.sh: SAN (sanlib / sanrun) vs kernel TCP, same run, interleaved; load now $(cut -d' ' -f1-3 /proc/loadavg)"
print_table
echo "SAN/TCP: ratio of medians (rates: >1 favours SAN; costs such as cpu, fds, memory, p99 latency: <1 favours SAN)."
echo "errors: wrk socket errors + non-2xx responses; redis: error lines; churn/hold: failed connects, echoes."
echo "CSV: $SUMMARY (summary), $RUNSCSV (every run); logs in $OUT/logs"
exit $STATUS
