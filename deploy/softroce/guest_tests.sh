#!/bin/bash
# Runs inside the softroce guest, chrooted into the host's root (read-only; /tmp is the guest's):
# sets up rxe0 on a veth pair and runs sanlib's verbs tests from BUILD_DIR, then the raw perftest
# figures on the same device. Every test is a real program: a skip inside the guest counts as a
# failure (the guest exists to have a device). Ends with
#   SAN-SOFTROCE-SUMMARY passed=N failed=M
# and powers the guest off.
# Usage (from guest_init.sh): guest_tests.sh BUILD_DIR FILTER ROLE
BUILD=$1; FILTER=${2:-all}; ROLE=${3:-}
GFILTER=$(sed -n 's/.* san_gfilter=\([^ ]*\).*/\1/p' /proc/cmdline)  # developers: one gtest filter
SANLOG=$(sed -n 's/.* san_log=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$SANLOG" ] && export SAN_LOG=$SANLOG
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR=/tmp
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
BIN=$BUILD/bin
up() { cut -d' ' -f1 /proc/uptime; }
off() { echo 1 > /proc/sys/kernel/sysrq; sync; echo o > /proc/sysrq-trigger; sleep 5; }
PASSED=0; FAILED=0
note() { echo "=== $*"; }

ip link set lo up
if [ -z "$ROLE" ]; then
  ME=10.0.0.1
  ip link add veth0 type veth peer name veth1 && ip addr add 10.0.0.1/24 dev veth0 &&
    ip addr add 10.0.0.2/24 dev veth1 && ip link set veth0 up && ip link set veth1 up ||
    { echo "SAN-SOFTROCE-SETUP-FAILED: veth"; off; }
  rdma link add rxe0 type rxe netdev veth0 || { echo "SAN-SOFTROCE-SETUP-FAILED: rdma link add"; off; }
else
  [ "$ROLE" = server ] && { ME=10.0.0.1; PEER=10.0.0.2; } || { ME=10.0.0.2; PEER=10.0.0.1; }
  ip addr add $ME/24 dev eth0 && ip link set eth0 up || { echo "SAN-SOFTROCE-SETUP-FAILED: eth0"; off; }
  rdma link add rxe0 type rxe netdev eth0 || { echo "SAN-SOFTROCE-SETUP-FAILED: rdma link add"; off; }
fi
GIDX=""
HEX=$(printf '%02x%02x:%02x%02x' ${ME//./ })
for try in $(seq 1 50); do  # the GID table fills in asynchronously after the link comes up
  f=$(grep -l "ffff:$HEX\$" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null | head -1)
  [ -n "$f" ] && { GIDX=${f##*/}; break; }
  sleep 0.2
done
[ -n "$GIDX" ] || { echo "looked for ffff:$HEX"; head -3 /sys/class/infiniband/rxe0/ports/1/gids/[0-3]; }
note "guest: rxe0 on ${ROLE:-veth0} ($ME), IPv4 GID index ${GIDX:-none}, uptime $(up) s"
ibv_devices | sed 's/^/    /'
# What an RDMA atomic is atomic against (docs/protocol.md "Large messages over verbs": rxe says
# HCA, not GLOB, so a CPU-vs-NIC compare-and-swap would not be sound on it).
ibv_devinfo -v -d rxe0 2>/dev/null | grep -E 'atomic_cap' | sed 's/^[[:space:]]*/    rxe0 /'
[ -n "$GIDX" ] || { echo "SAN-SOFTROCE-SETUP-FAILED: no IPv4 GID"; off; }
export SAN_TEST_VERBS_IP=$ME

# A GoogleTest binary: passes only if it ran something, nothing failed and nothing skipped.
gtest() { # name binary [args...]
  local name=$1 bin=$2; shift 2
  [ -x "$bin" ] || { note "TEST $name: MISSING $bin"; FAILED=$((FAILED+1)); return; }
  local t0; t0=$(up)
  timeout 300 "$bin" "$@" ${GFILTER:+--gtest_filter=$GFILTER} > /tmp/$name.log 2>&1; local rc=$?
  local p s f
  p=$(grep -c '^\[       OK \]' /tmp/$name.log); s=$(grep -c '^\[  SKIPPED \]' /tmp/$name.log)
  f=$(grep -c '^\[  FAILED  \]' /tmp/$name.log)
  if [ $rc -eq 0 ] && [ "$p" -gt 0 ] && [ "$s" -eq 0 ]; then
    PASSED=$((PASSED+1)); note "TEST $name: PASS ($p cases, $(echo "$(up) - $t0" | bc 2>/dev/null || echo ?) s)"
  else
    FAILED=$((FAILED+1)); note "TEST $name: FAIL (rc $rc, $p ok, $s skipped, $f failed lines)"
    grep -v '^\[ *\(RUN\|OK\) ' /tmp/$name.log | tail -60
  fi
  grep -E '^SAN-' /tmp/$name.log
}

# A server/client pair of programs on this guest (server first; client retried while it starts).
pair() { # name "server cmd" "client cmd" [ref]   (ref: a reference figure, reported, not counted)
  local name=$1 ref=${4:-}
  timeout 120 $2 > /tmp/$name.srv 2>&1 & local spid=$!
  # san-verbs-bench says when it listens (a loaded emulated guest can take many seconds to start
  # a sanitizer build from 9p): start the client then. perftest's banner is buffered: a second.
  sleep 1
  case $2 in *san-verbs-bench*)
    for i in $(seq 1 600); do
      grep -q "listening on" /tmp/$name.srv 2>/dev/null && break
      kill -0 $spid 2>/dev/null || break
      sleep 0.1
    done ;;
  esac
  local rc=1
  : > /tmp/$name.cli
  for k in 1 2 3 4 5; do timeout 120 $3 >> /tmp/$name.cli 2>&1 && { rc=0; break; }; sleep 1; done
  wait $spid; local src=$?
  if [ $rc -eq 0 ] && [ $src -eq 0 ]; then
    [ -n "$ref" ] && note "REFERENCE $name: ran" || { PASSED=$((PASSED+1)); note "PAIR $name: PASS"; }
  elif [ -n "$ref" ]; then
    note "REFERENCE $name: did not run (server rc $src, client rc $rc); not counted"
  else
    FAILED=$((FAILED+1)); note "PAIR $name: FAIL (server rc $src, client rc $rc)"
  fi
  echo "--- $name server:"; tail -25 /tmp/$name.srv; echo "--- $name client:"; tail -25 /tmp/$name.cli
}

# san-bench with sanlib sockets forced onto verbs (SAN_PROVIDER=verbs: both ends are on this guest,
# where auto would rightly pick shm) beside kernel TCP on the same address. Blocking mode only: a
# spinning peer starves rxe's kernel work under TCG. Passes when it measured, verified its data,
# and the sanlib processes' SAN_REPORT lines say their connections were verbs.
sanbench() { # label kind [san-bench options...]   (ZC: on/off/default = SAN_ZERO_COPY_MIN 64K/off/unset)
  local label=$1 kind=$2; shift 2
  local report=/tmp/san-bench-$label.report; rm -f "$report"
  local zc_env=""
  case ${ZC:-default} in on) zc_env=SAN_ZERO_COPY_MIN=65536 ;; off) zc_env=SAN_ZERO_COPY_MIN=off ;; esac
  env $zc_env SAN_PROVIDER=verbs SAN_REPORT=$report timeout 150 "$BIN/san-bench" "$kind" --host $ME \
    --transports sanlib,tcp --mode block "$@" > /tmp/san-bench-$label.log 2>&1; local rc=$?
  local verbs shm zc
  verbs=$(grep -o 'verbs_connections=[0-9]*' "$report" 2>/dev/null | awk -F= '{s+=$2} END {print s+0}')
  shm=$(grep -o ' shm_connections=[0-9]*' "$report" 2>/dev/null | awk -F= '{s+=$2} END {print s+0}')
  zc=$(grep -o 'verbs_zero_copy_bytes_sent=[0-9]*' "$report" 2>/dev/null | awk -F= '{s+=$2} END {print s+0}')
  local zc_ok=1  # "on" must have taken the zero-copy path, "off" must not have
  case ${ZC:-default} in on) [ "${zc:-0}" -gt 0 ] || zc_ok=0 ;; off) [ "${zc:-0}" -eq 0 ] || zc_ok=0 ;; esac
  if [ $rc -eq 0 ] && [ "${verbs:-0}" -gt 0 ] && [ "${shm:-0}" -eq 0 ] && [ $zc_ok -eq 1 ]; then
    PASSED=$((PASSED+1)); note "BENCH san-bench $label over verbs: PASS ($verbs verbs connections, zero-copy ${ZC:-default}: $zc bytes sent from application memory)"
  else
    FAILED=$((FAILED+1)); note "BENCH san-bench $label over verbs: FAIL (rc $rc, verbs ${verbs:-0}, shm ${shm:-0}, zero-copy ${ZC:-default}: ${zc:-0} bytes)"
  fi
  cat /tmp/san-bench-$label.log
}

if [ -z "$ROLE" ]; then
  case $FILTER in all|conformance)
    gtest fabric_conformance_verbs "$BIN/fabric_conformance_test" --gtest_filter='*/verbs' ;; esac
  case $FILTER in all|verbs)
    gtest verbs_provider "$BIN/verbs_provider_test"
    gtest verbs_stream "$BIN/verbs_stream_test" ;; esac
  case $FILTER in all|verbs|sockets)
    # sanlib sockets choosing verbs: both directions, EOF, sanstat, peer death, auto -> shm here.
    gtest verbs_socket "$BIN/verbs_socket_test" ;; esac
  case $FILTER in all|bench)
    if [ -x "$BIN/san-verbs-bench" ]; then
      pair san_verbs_bench "$BIN/san-verbs-bench --server $ME --port 18515" \
                           "$BIN/san-verbs-bench --client $ME --port 18515"
    fi
    if [ -x "$BIN/san-bench" ]; then
      sanbench latency latency --sizes 64,4096 --iters 200
      sanbench bandwidth bandwidth --sizes 65536 --iters 200
      # Large messages with and without the zero-copy path (docs/protocol.md "Large messages
      # over verbs"): the same 1 MiB sends, copied into the staging slots, then from the
      # application's buffer; ib_write_bw below is the raw fabric on the same device.
      ZC=off sanbench bandwidth-1m-copy bandwidth --sizes 1M --iters 60
      ZC=on sanbench bandwidth-1m-zero-copy bandwidth --sizes 1M --iters 60
    else
      FAILED=$((FAILED+1)); note "BENCH san-bench: MISSING $BIN/san-bench"
    fi
    # The raw fabric on the same device: polling, and waiting on the completion channel (-e).
    pair ib_send_lat "ib_send_lat -d rxe0 -x $GIDX -n 1000" "ib_send_lat -d rxe0 -x $GIDX -n 1000 $ME" ref
    pair ib_send_lat_events "ib_send_lat -d rxe0 -x $GIDX -n 1000 -e" "ib_send_lat -d rxe0 -x $GIDX -n 1000 -e $ME" ref
    pair ib_write_bw "ib_write_bw -d rxe0 -x $GIDX -n 1000" "ib_write_bw -d rxe0 -x $GIDX -n 1000 $ME" ref
    pair ib_write_bw_1m "ib_write_bw -d rxe0 -x $GIDX -s 1048576 -n 100" "ib_write_bw -d rxe0 -x $GIDX -s 1048576 -n 100 $ME" ref ;; esac
else
  for i in $(seq 1 60); do ping -c1 -W1 $PEER >/dev/null 2>&1 && break; done
  note "[$ROLE] peer $PEER reachable at $(up) s"
  if [ "$ROLE" = server ]; then
    timeout 200 "$BIN/san-verbs-bench" --server $ME --port 18515 > /tmp/b.log 2>&1; rc=$?
  else
    rc=1; for k in $(seq 1 5); do sleep 2; echo "attempt $k" >> /tmp/b.log; timeout 200 "$BIN/san-verbs-bench" --client $PEER --port 18515 >> /tmp/b.log 2>&1 && { rc=0; break; }; done
  fi
  cat /tmp/b.log
  [ $rc -eq 0 ] && PASSED=$((PASSED+1)) || FAILED=$((FAILED+1))
  note "[$ROLE] san-verbs-bench rc $rc"
  # sanlib sockets between the two guests with SAN_PROVIDER=auto on both: the peer is on another
  # host and rxe0 routes to it, so auto must pick verbs (the peer program checks san_getinfo);
  # 4 MiB each way at once, checked, then EOF both ways.
  export SAN_PROVIDER=auto
  if [ "$ROLE" = server ]; then
    timeout 200 "$BIN/verbs_socket_peer" server $ME verbs 4194304 18516 > /tmp/s.log 2>&1; rc=$?
  else
    rc=1; for k in $(seq 1 10); do sleep 2; echo "attempt $k" >> /tmp/s.log; timeout 200 "$BIN/verbs_socket_peer" client $PEER 18516 verbs 4194304 >> /tmp/s.log 2>&1 && { rc=0; break; }; done
  fi
  cat /tmp/s.log
  [ $rc -eq 0 ] && PASSED=$((PASSED+1)) || FAILED=$((FAILED+1))
  note "[$ROLE] sanlib sockets, SAN_PROVIDER=auto across guests: rc $rc"
fi
echo "SAN-SOFTROCE-SUMMARY passed=$PASSED failed=$FAILED"
off
