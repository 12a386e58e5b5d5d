#!/bin/sh
# ftp-bench: SOVIA Table I on today's stack (issue 5). Files of 19,090,223 and 145,864,380 bytes on
# tmpfs, each fetched (get) and stored (put), in one run:
#   san    ftp_client <-> ftpd, both on sanlib (control upgraded, data over shm)
#   tcp    the same two programs with SAN_PROVIDER=off (kernel TCP for everything)
#   vsftpd vsftpd -> lftp over kernel TCP (get: lftp get; put: lftp put)
#   cp     a local cp of the same file (memory speed on this machine)
# MB/s = 10^6 bytes / second of wall time of the client command (connect, login and teardown
# included, as a user sees it); for ftp_client also "xfer": the transfer alone, from the time the
# client reports ("N bytes in S s"). Every copy is compared with its source. Median of the runs.
# Usage: ftp-bench.sh <build dir> [runs]   (e.g. build/release). Needs root for vsftpd's
# anonymous upload directory. Prints; never fails because the machine is slow.
set -u
B=$(cd "${1:-build/release}" && pwd)
RUNS=${2:-3}
FTPD="$B/bin/ftpd"
CLIENT="$B/bin/ftp_client"
for t in "$FTPD" "$CLIENT"; do
  [ -x "$t" ] || { echo "ftp-bench: $t not built" >&2; exit 2; }
done
BASE=/dev/shm
[ -d "$BASE" ] || BASE=/tmp
TMP=$(mktemp -d "$BASE/ftp-bench.XXXXXX")
chmod 755 "$TMP"
trap 'pkill -P $$ 2>/dev/null; rm -rf "$TMP"' EXIT
SIZES="19090223 145864380"

now() { date +%s.%N; }
mbps() { echo "$1 $2 $3" | awk '{ s = $3 - $2; if (s <= 0) s = 1e-9; printf "%.1f", $1 / s / 1e6 }'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else print a[int((NR + 1) / 2)] }'; }
same() { cmp -s "$1" "$2" || { echo "ftp-bench: $2 differs from $1" >&2; echo bad; }; }

mkdir -p "$TMP/root/up" "$TMP/local" "$TMP/anon/incoming" "$TMP/empty"
for s in $SIZES; do
  head -c "$s" /dev/urandom > "$TMP/root/f$s"
  cp "$TMP/root/f$s" "$TMP/anon/f$s"
  chmod 644 "$TMP/anon/f$s"
done

# Our ftpd, standalone, one account whose root is $TMP/root.
# A SHA-512 crypt hash when openssl can make one (cheaper to check than ftpd's yescrypt default).
HASH=$(openssl passwd -6 bench 2> /dev/null || echo bench | "$FTPD" --hash-password)
echo "bench:$HASH:$TMP/root:rw" > "$TMP/users"
start_ftpd() {  # $1: one environment assignment for ftpd
  rm -f "$TMP/port"
  env $1 "$FTPD" -D --listen-address 127.0.0.1 --port 0 --port-file "$TMP/port" \
    --users-file "$TMP/users" --login-fail-delay-ms 0 > "$TMP/ftpd.log" 2>&1 &
  FTPD_PID=$!
  i=0
  while [ ! -s "$TMP/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
  PORT=$(cat "$TMP/port" 2>/dev/null)
}
stop_ftpd() { kill "$FTPD_PID" 2>/dev/null; wait "$FTPD_PID" 2>/dev/null; }

# ours <env> <size> <get|put>: one transfer with ftp_client; prints "wallMB/s:xferMB/s"
ours() {
  url="ftp://bench:bench@127.0.0.1:$PORT"
  out="$TMP/local/got"
  rm -f "$out" "$TMP/root/up/f$2"
  if [ "$3" = get ]; then
    t0=$(now); env $1 "$CLIENT" "$url/f$2" -o "$out" > "$TMP/client.log" 2>&1; t1=$(now)
    [ "$(same "$TMP/root/f$2" "$out")" = bad ] && return
  else
    t0=$(now); env $1 "$CLIENT" --put "$TMP/root/f$2" "$url/up/f$2" > "$TMP/client.log" 2>&1
    t1=$(now)
    [ "$(same "$TMP/root/f$2" "$TMP/root/up/f$2")" = bad ] && return
  fi
  xfer=$(sed -n 's/^\([0-9]*\) bytes in \([0-9.]*\) s.*/\1 0 \2/p' "$TMP/client.log" | tail -1)
  echo "$(mbps "$2" "$t0" "$t1"):$([ -n "$xfer" ] && mbps $xfer)"
}

# vsftpd (anonymous, upload into incoming/) and lftp.
VSFTPD_PORT=""
if [ -x /usr/sbin/vsftpd ] && command -v lftp > /dev/null && id ftp > /dev/null 2>&1; then
  chown ftp "$TMP/anon/incoming"
  VSFTPD_PORT=$((30000 + $$ % 20000))
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
xferlog_enable=NO
syslog_enable=NO
vsftpd_log_file=$TMP/vsftpd.log
CONF
  /usr/sbin/vsftpd "$TMP/vsftpd.conf" > "$TMP/vsftpd.out" 2>&1 &
  sleep 0.5
fi
theirs() {  # <size> <get|put>
  rm -f "$TMP/local/got" "$TMP/anon/incoming/f$1"
  open="set net:max-retries 1; open -u anonymous,x ftp://127.0.0.1:$VSFTPD_PORT"
  if [ "$2" = get ]; then
    t0=$(now); lftp -c "$open; get f$1 -o $TMP/local/got" > /dev/null 2>&1; t1=$(now)
    [ "$(same "$TMP/anon/f$1" "$TMP/local/got")" = bad ] && return
  else
    t0=$(now); lftp -c "$open; cd incoming; put $TMP/anon/f$1 -o f$1" > /dev/null 2>&1; t1=$(now)
    [ "$(same "$TMP/anon/f$1" "$TMP/anon/incoming/f$1")" = bad ] && return
  fi
  mbps "$1" "$t0" "$t1"
}
copy() {  # <size>
  rm -f "$TMP/local/got"
  t0=$(now); cp "$TMP/root/f$1" "$TMP/local/got"; t1=$(now)
  mbps "$1" "$t0" "$t1"
}

echo "ftp-bench: MB/s (10^6 B/s), median of $RUNS runs; files on $BASE"
printf '%-10s %-4s %9s %9s %9s %9s %9s %9s %9s\n' size op san "san xfer" tcp "tcp xfer" \
  vsftpd cp san/tcp
for s in $SIZES; do
  for op in get put; do
    san=""; tcp=""; vs=""; cpv=""
    i=0
    while [ $i -lt "$RUNS" ]; do
      start_ftpd FTP_BENCH=san; san="$san $(ours FTP_BENCH=san "$s" $op)"; stop_ftpd
      start_ftpd SAN_PROVIDER=off; tcp="$tcp $(ours SAN_PROVIDER=off "$s" $op)"; stop_ftpd
      [ -n "$VSFTPD_PORT" ] && vs="$vs $(theirs "$s" $op)"
      cpv="$cpv $(copy "$s")"
      i=$((i + 1))
    done
    sanx=$(for v in $san; do echo "${v#*:}"; done | tr '\n' ' ' | median)
    tcpx=$(for v in $tcp; do echo "${v#*:}"; done | tr '\n' ' ' | median)
    san=$(for v in $san; do echo "${v%:*}"; done | tr '\n' ' ' | median)
    tcp=$(for v in $tcp; do echo "${v%:*}"; done | tr '\n' ' ' | median)
    vs=$(echo "$vs" | median); cpv=$(echo "$cpv" | median)
    ratio=$(echo "$san $tcp" | awk '{ if ($2 > 0 && $1 != "-") printf "%.2fx", $1 / $2; else print "-" }')
    printf '%-10s %-4s %9s %9s %9s %9s %9s %9s %9s\n' "$s" "$op" "$san" "$sanx" "$tcp" "$tcpx" \
      "$vs" "$cpv" "$ratio"
  done
done
