#!/bin/sh
# ftp-bench: SOVIA Table I on today's stack (issue 5). Files of 19,090,223 and 145,864,380 bytes on
# tmpfs, each fetched (get) and stored (put):
#   san    ftp_client <-> ftpd, both on sanlib (control upgraded, data over shm)
#   tcp    the same two programs with SAN_PROVIDER=off (kernel TCP for everything)
#   vsftpd vsftpd -> lftp over kernel TCP (get: lftp get; put: lftp put)
#   cp     a local cp of the same file (memory speed on this machine)
# Every run measures all four back to back (same-run baselines); the table gives the median of
# the runs and, below it, min-max. MB/s = 10^6 bytes / second of wall time of the client command
# (connect, login and teardown included, as a user sees it); "xfer" is the transfer alone as
# ftp_client reports it ("N bytes in S s"; SOVIA's Table I used the client's reported time too),
# and for vsftpd as vsftpd logs it (its rate around the data transfer; lftp prints none below 1 s).
# Every copy is compared with its source; a failed or
# timed-out transfer counts as "-" and is reported on stderr.
# Bounded: every command runs under timeout(1) (45 s), lftp and ftp_client have 20 s network
# timeouts, and no new measurement starts once the budget (default 480 s) is spent, so an
# invocation ends within budget + 50 s (under 10 minutes by default) even if every peer hangs.
# After the table, when perf works: CPU per SAN transfer by stage (client, server session) and
# of cp, to show which stage bounds the transfer (docs/ftp.md).
# Usage: ftp-bench.sh <build dir> [runs] [budget seconds]   (e.g. build/release 5)
# Needs root for vsftpd's anonymous upload directory (vsftpd is skipped otherwise).
set -u
B=$(cd "${1:-build/release}" && pwd)
RUNS=${2:-5}
BUDGET=${3:-480}
STEP_TIMEOUT=45
FTPD="$B/bin/ftpd"
CLIENT="$B/bin/ftp_client"
for t in "$FTPD" "$CLIENT"; do
  [ -x "$t" ] || { echo "ftp-bench: $t not built" >&2; exit 2; }
done
BASE=/dev/shm
[ -d "$BASE" ] || BASE=/tmp
TMP=$(mktemp -d "$BASE/ftp-bench.XXXXXX")
chmod 755 "$TMP"
SAN_PID=""; TCP_PID=""; VS_PID=""
CPU_PERF_PID=""
cleanup() {
  if [ -n "$CPU_PERF_PID" ]; then  # a CPU-measuring daemon (perf's child) still running
    for p in $(ps -o pid= --ppid "$CPU_PERF_PID"); do kill "$p" 2> /dev/null; done
  fi
  for p in $SAN_PID $TCP_PID $VS_PID; do kill "$p" 2> /dev/null; done
  for p in $SAN_PID $TCP_PID $VS_PID; do wait "$p" 2> /dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
SIZES="19090223 145864380"
START=$(date +%s)

now() { date +%s.%N; }
mbps() { echo "$1 $2 $3" | awk '{ s = $3 - $2; if (s <= 0) s = 1e-9; printf "%.0f", $1 / s / 1e6 }'; }
# stats "v1 v2 ...": "median min-max" of the numeric values ("-" when there are none).
stats() {
  echo "$1" | tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -n |
    awk '{ a[NR] = $1 } END { if (NR == 0) print "- -"; else printf "%s %s-%s\n", a[int((NR + 1) / 2)], a[1], a[NR] }'
}
same() { cmp -s "$1" "$2"; }
bounded() { timeout -k 5 "$STEP_TIMEOUT" "$@"; }
over_budget() { [ $(($(date +%s) - START)) -ge "$BUDGET" ]; }

mkdir -p "$TMP/root/up" "$TMP/local" "$TMP/anon/incoming" "$TMP/empty"
for s in $SIZES; do
  head -c "$s" /dev/urandom > "$TMP/root/f$s"
  cp "$TMP/root/f$s" "$TMP/anon/f$s"
  chmod 644 "$TMP/anon/f$s"
done

# Our ftpd, standalone, one account whose root is $TMP/root: one daemon on sanlib, one with
# SAN_PROVIDER=off; each session is a fresh ftpd image either way.
# A SHA-512 crypt hash when openssl can make one (cheaper to check than ftpd's yescrypt default).
HASH=$(openssl passwd -6 bench 2> /dev/null || echo bench | "$FTPD" --hash-password)
echo "bench:$HASH:$TMP/root:rw" > "$TMP/users"
# --chroot no: like the vsftpd it is compared with (chroot_local_user=NO), the session is not
# chrooted; older ftpd builds do not know the flag (and never chroot).
CHROOT_FLAG=""
"$FTPD" --help 2> /dev/null | grep -q -- '--chroot' && CHROOT_FLAG="--chroot=no"
start_ftpd() {  # <name> <one environment assignment>; sets <name>_PID and <name>_PORT
  local name=$1 tries=0
  rm -f "$TMP/port.$name"
  env "$2" "$FTPD" -D --listen-address 127.0.0.1 --port 0 --port-file "$TMP/port.$name" \
    --users-file "$TMP/users" --login-fail-delay-ms 0 $CHROOT_FLAG > "$TMP/ftpd.$name.log" 2>&1 &
  eval "${name}_PID=$!"
  while [ ! -s "$TMP/port.$name" ] && [ $tries -lt 100 ]; do sleep 0.05; tries=$((tries + 1)); done
  eval "${name}_PORT=$(cat "$TMP/port.$name" 2> /dev/null || echo 0)"
}
start_ftpd SAN FTP_BENCH=san
start_ftpd TCP SAN_PROVIDER=off

# ours <env> <port> <size> <get|put>: one transfer with ftp_client; prints "wall:xfer" MB/s
ours() {
  local env=$1 port=$2 size=$3 op=$4 url out t0 t1 rc xfer
  url="ftp://bench:bench@127.0.0.1:$port"
  out="$TMP/local/got"
  rm -f "$out" "$TMP/root/up/f$size"
  t0=$(now)
  if [ "$op" = get ]; then
    bounded env "$env" "$CLIENT" --timeout 20000 "$url/f$size" -o "$out" > "$TMP/client.log" 2>&1
  else
    bounded env "$env" "$CLIENT" --timeout 20000 --put "$TMP/root/f$size" "$url/up/f$size" \
      > "$TMP/client.log" 2>&1
  fi
  rc=$?
  t1=$(now)
  [ "$op" = get ] || out="$TMP/root/up/f$size"
  if [ $rc -ne 0 ] || ! same "$TMP/root/f$size" "$out"; then
    echo "ftp-bench: ftp_client $env $op $size failed (exit $rc): $(tail -1 "$TMP/client.log")" >&2
    echo "-:-"
    return
  fi
  xfer=$(sed -n 's/^\([0-9]*\) bytes in \([0-9.]*\) s.*/\1 0 \2/p' "$TMP/client.log" | tail -1)
  echo "$(mbps "$size" "$t0" "$t1"):$([ -n "$xfer" ] && mbps $xfer || echo -)"
}

# vsftpd (anonymous, upload into incoming/) and lftp.
VSFTPD_PORT=""
if [ -x /usr/sbin/vsftpd ] && command -v lftp > /dev/null && id ftp > /dev/null 2>&1; then
  chown ftp "$TMP/anon/incoming"
  # A free port: bind one with port 0 through python if there is one, else a guess.
  VSFTPD_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2> /dev/null || echo $((30000 + $$ % 20000)))
  cat > "$TMP/vsftpd.conf" << CONF
listen=YES
listen_ipv6=NO
background=NO
listen_address=127.0.0.1
listen_port=$VSFTPD_PORT
anonymous_enable=YES
local_enable=NO
no_anon_password=YES
anon_root=$TMP/anon
write_enable=YES
anon_upload_enable=YES
anon_umask=022
connect_from_port_20=NO
seccomp_sandbox=NO
isolate=NO
isolate_network=NO
secure_chroot_dir=$TMP/empty
xferlog_enable=YES
xferlog_std_format=NO
syslog_enable=NO
vsftpd_log_file=$TMP/vsftpd.log
CONF
  /usr/sbin/vsftpd "$TMP/vsftpd.conf" > "$TMP/vsftpd.out" 2>&1 &
  VS_PID=$!
  sleep 0.5
fi
LFTP_SET="set net:max-retries 1; set net:timeout 20; set net:reconnect-interval-base 1; set ftp:ssl-allow no; set xfer:clobber yes"
theirs() {  # <size> <get|put>
  local size=$1 op=$2 open t0 t1 rc out xfer
  [ -n "$VSFTPD_PORT" ] || return
  rm -f "$TMP/local/got" "$TMP/anon/incoming/f$size"
  open="$LFTP_SET; open -u anonymous,x ftp://127.0.0.1:$VSFTPD_PORT"
  t0=$(now)
  if [ "$op" = get ]; then
    bounded lftp -c "$open; get f$size -o $TMP/local/got" > "$TMP/lftp.log" 2>&1
    rc=$?; out="$TMP/local/got"
  else
    bounded lftp -c "$open; cd incoming; put $TMP/anon/f$size -o f$size" > "$TMP/lftp.log" 2>&1
    rc=$?; out="$TMP/anon/incoming/f$size"
  fi
  t1=$(now)
  if [ $rc -ne 0 ] || ! same "$TMP/anon/f$size" "$out"; then
    echo "ftp-bench: lftp $op $size failed (exit $rc): $(tail -1 "$TMP/lftp.log")" >&2
    echo "-:-"
    return
  fi
  # vsftpd's own log line for it ("OK DOWNLOAD: ..., N bytes, R Kbyte/sec", KiB/s it measured
  # around the data transfer alone): the transfer rate beside the wall time, as ours reports.
  xfer=$(grep -E "OK (DOWNLOAD|UPLOAD):.*f$size\", $size bytes" "$TMP/vsftpd.log" 2> /dev/null |
    tail -1 | sed -n 's/.* \([0-9.]*\)Kbyte\/sec.*/\1/p' | awk '{ printf "%.0f", $1 * 1024 / 1e6 }')
  echo "$(mbps "$size" "$t0" "$t1"):${xfer:--}"
}
copy() {  # <size>
  local size=$1 t0 t1
  rm -f "$TMP/local/got"
  t0=$(now); bounded cp "$TMP/root/f$size" "$TMP/local/got"; t1=$(now)
  same "$TMP/root/f$size" "$TMP/local/got" && mbps "$size" "$t0" "$t1" || echo "-"
}

# CPU of one SAN transfer, by stage (after the timed runs, so the measuring costs no wall time):
# the client's task-clock from perf stat; the server session's from perf stat around a daemon of
# its own that serves just this transfer (perf counts the daemon and, inherited, its forked and
# exec'd session), less the median of an idle daemon's start and stop (cpu_idle). Both in ms with
# perf's resolution (the daemon's reaped children in /proc were 10 ms ticks). Prints
# "client_ms:server_ms".
cpu_daemon_start() {  # <perf output>: sets CPU_PERF_PID (perf's pid) and CPU_PORT
  local tries=0
  rm -f "$TMP/port.cpu" "$1"
  env FTP_BENCH=san perf stat -x, -e task-clock -o "$1" "$FTPD" -D --listen-address 127.0.0.1 \
    --port 0 --port-file "$TMP/port.cpu" --users-file "$TMP/users" --login-fail-delay-ms 0 \
    $CHROOT_FLAG > "$TMP/ftpd.cpu.log" 2>&1 &
  CPU_PERF_PID=$!
  while [ ! -s "$TMP/port.cpu" ] && [ $tries -lt 100 ]; do sleep 0.05; tries=$((tries + 1)); done
  CPU_PORT=$(cat "$TMP/port.cpu" 2> /dev/null || echo 0)
}
cpu_daemon_stop() {  # <perf output>: stops the daemon (perf's child), prints its task-clock ms
  local child tries=0
  sleep 0.3  # the session has ended and been reaped
  for child in $(ps -o pid= --ppid "$CPU_PERF_PID"); do kill "$child" 2> /dev/null; done
  # Called in $(...), a subshell, which cannot wait for perf: wait for perf's report instead.
  while ! grep -q task-clock "$1" 2> /dev/null && [ $tries -lt 100 ]; do
    sleep 0.05; tries=$((tries + 1))
  done
  grep task-clock "$1" 2> /dev/null | cut -d, -f1
}
cpu_idle() {  # task-clock ms of a daemon started and stopped without a session
  cpu_daemon_start "$TMP/srv.perf"
  cpu_daemon_stop "$TMP/srv.perf"
}
cpu_of() {  # <size> <get|put> <idle daemon ms>
  local size=$1 op=$2 idle=$3 cl sv url
  cpu_daemon_start "$TMP/srv.perf"
  url="ftp://bench:bench@127.0.0.1:$CPU_PORT"
  rm -f "$TMP/local/got" "$TMP/root/up/f$size"
  if [ "$op" = get ]; then
    bounded perf stat -x, -e task-clock -o "$TMP/cpu.perf" "$CLIENT" --timeout 20000 \
      "$url/f$size" -o "$TMP/local/got" > /dev/null 2>&1
  else
    bounded perf stat -x, -e task-clock -o "$TMP/cpu.perf" "$CLIENT" --timeout 20000 \
      --put "$TMP/root/f$size" "$url/up/f$size" > /dev/null 2>&1
  fi
  sv=$(cpu_daemon_stop "$TMP/srv.perf")
  cl=$(grep task-clock "$TMP/cpu.perf" 2> /dev/null | cut -d, -f1)
  sv=$(echo "${sv:-x} $idle" | awk '$1 ~ /^[0-9.]+$/ { printf "%.2f", $1 - $2; exit } { print "-" }')
  echo "${cl:--}:$sv"
}
cp_cpu() {  # <size>: cp's task-clock
  rm -f "$TMP/local/got"
  bounded perf stat -x, -e task-clock -o "$TMP/cpu.perf" cp "$TMP/root/f$1" "$TMP/local/got"
  grep task-clock "$TMP/cpu.perf" | cut -d, -f1
}

# Results per row (size, op): space-separated lists in R_<size>_<op>_<column>.
run=0
while [ $run -lt "$RUNS" ]; do
  if over_budget; then
    echo "ftp-bench: time budget (${BUDGET}s) spent after $run runs" >&2
    break
  fi
  for s in $SIZES; do
    for op in get put; do
      over_budget && continue  # the rest of this run is left out, not waited for
      row="R_${s}_${op}"
      v=$(ours FTP_BENCH=san "$SAN_PORT" "$s" $op)
      eval "${row}_san=\"\${${row}_san:-} ${v%:*}\"; ${row}_sanx=\"\${${row}_sanx:-} ${v#*:}\""
      v=$(ours SAN_PROVIDER=off "$TCP_PORT" "$s" $op)
      eval "${row}_tcp=\"\${${row}_tcp:-} ${v%:*}\"; ${row}_tcpx=\"\${${row}_tcpx:-} ${v#*:}\""
      v=$(theirs "$s" $op)
      [ -n "$v" ] || v="-:-"
      eval "${row}_vs=\"\${${row}_vs:-} ${v%:*}\"; ${row}_vsx=\"\${${row}_vsx:-} ${v#*:}\""
      v=$(copy "$s")
      eval "${row}_cp=\"\${${row}_cp:-} $v\""
    done
  done
  run=$((run + 1))
done

echo "ftp-bench: MB/s (10^6 B/s) of wall time, median of $run runs (the last may be partial if the budget ran out), min-max below; files on $BASE"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (shared machines: expect noise)"
printf '%-10s %-4s %13s %13s %13s %13s %13s %13s %13s %8s %8s %8s %8s\n' size op san "san xfer" \
  tcp "tcp xfer" vsftpd "vsftpd xfer" cp san/cp san/vsftpd xfer/cp "xfer/vs x"
for s in $SIZES; do
  for op in get put; do
    row="R_${s}_${op}"
    line1=""; line2=""
    for col in san sanx tcp tcpx vs vsx cp; do
      eval "vals=\"\${${row}_${col}:-}\""
      set -- $(stats "$vals")
      eval "med_$col=$1"
      line1="$line1 $(printf '%13s' "$1")"
      line2="$line2 $(printf '%13s' "$2")"
    done
    ratios=$(echo "$med_san $med_cp $med_vs $med_sanx $med_vsx" | awk '
      function r(a, b) { return (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) ? sprintf("%.2f", a / b) : "-" }
      { printf "%8s %8s %8s %8s", r($1, $2), r($1, $3), r($4, $2), r($4, $5) }')
    printf '%-10s %-4s%s %s\n' "$s" "$op" "$line1" "$ratios"
    printf '%-10s %-4s%s\n' "" "" "$line2"
  done
done

# The stages' CPU (see cpu_of), up to 5 transfers per row within what is left of the budget.
if command -v perf > /dev/null && perf stat -e task-clock true > /dev/null 2>&1; then
  idles=""
  for k in 1 2 3; do idles="$idles $(cpu_idle)"; done
  set -- $(stats "$idles"); idle=$1
  echo "CPU ms per SAN transfer, median (min-max) of the runs: client (perf stat task-clock), server"
  echo "session (perf stat of a daemon serving only that transfer, less an idle daemon's $idle ms),"
  echo "and cp of the same file"
  printf '%-10s %-4s %19s %19s %19s\n' size op client server cp
  for s in $SIZES; do
    for op in get put; do
      cl=""; sv=""; c=""
      for k in 1 2 3 4 5; do
        over_budget && break
        v=$(cpu_of "$s" $op "$idle"); cl="$cl ${v%:*}"; sv="$sv ${v#*:}"; c="$c $(cp_cpu "$s")"
      done
      set -- $(stats "$cl"); a="$1 ($2)"
      set -- $(stats "$sv"); b="$1 ($2)"
      set -- $(stats "$c"); d="$1 ($2)"
      printf '%-10s %-4s %19s %19s %19s\n' "$s" $op "$a" "$b" "$d"
    done
  done
fi
