#!/bin/bash
# cluster_test.sh BUILD_DIR - cross-host fallback on a two-host cluster.sh cluster: an echo server
# (socat under sanrun) on n1; a client on n1 must get shm, a client on n2 (another host: another
# network namespace) must fall back to kernel TCP with the reason shown, and both must echo their
# bytes. sanstat, run on each host, is the witness. Then a libsan program (verbs_socket_peer) across
# the hosts, SAN_PROVIDER=auto and =verbs: TCP with a reason naming why verbs could not be used.
# Exit 0 pass, 1 fail, 77 cannot run here (not root, no `ip netns`, no socat, not built): ctest SKIP.
set -uo pipefail
skip() { echo "SKIP: cluster_test: $*" >&2; exit 77; }
fail() { echo "FAIL: cluster_test: $*" >&2; exit 1; }

BUILD=${1:-}
[ -n "$BUILD" ] && [ -d "$BUILD" ] || fail "usage: $0 BUILD_DIR"
HERE=$(cd "$(dirname "$0")" && pwd -P)
SANRUN=$BUILD/bin/sanrun; SANSTAT=$BUILD/bin/sanstat
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v socat >/dev/null || skip "no socat"
[ -x "$SANRUN" ] && [ -x "$SANSTAT" ] || skip "sanrun/sanstat not built in $BUILD"
[ -x "$BUILD/bin/verbs_socket_peer" ] || skip "verbs_socket_peer not built in $BUILD"
export SAN_CLUSTER_PREFIX=sct$$ SAN_CLUSTER_SUBNET=10.213.$(( $$ % 200 + 20 ))
C="$HERE/cluster.sh"
TMP=$(mktemp -d)
cleanup() {
  [ -n "${SRV:-}" ] && kill "$SRV" 2>/dev/null
  for p in ${CLIENTS:-}; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  "$C" down >/dev/null 2>&1
  rm -rf "$TMP"
}
trap cleanup EXIT
"$C" up 2 > "$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; skip "cannot create network namespaces here"; }
A1=$("$C" addr 1)
PORT=$(( 20000 + $$ % 20000 ))

# The server: echo, one process per connection (socat's fork), all SAN sockets under sanrun.
"$C" exec 1 "$SANRUN" -- socat TCP-LISTEN:$PORT,bind=$A1,reuseaddr,fork EXEC:cat > "$TMP/srv.log" 2>&1 &
SRV=$!
for i in $(seq 1 100); do
  "$C" exec 1 bash -c "exec 3<>/dev/tcp/$A1/$PORT" 2>/dev/null && break; sleep 0.1
done

# A client on each host; each sends one line, then after half a second a line every 10 ms for
# 0.3 s, keeps the connection open a while, prints the echo. (Under sanrun's default, late set-up,
# a local connection moves to shm once it has been in use for the delay: during those lines. A
# line now and then would leave it on TCP.)
client() { # host tag
  ( echo "hello from $2"; sleep 0.5
    for i in $(seq 1 30); do echo "again $i from $2"; sleep 0.01; done; sleep 3 ) |
    "$C" exec "$1" "$SANRUN" -- socat - TCP:$A1:$PORT > "$TMP/$2.out" 2>&1 &
  CLIENTS="${CLIENTS:-} $!"
}
client 1 local
client 2 remote
sleep 2
"$C" exec 1 "$SANSTAT" -a > "$TMP/stat1.txt" 2>&1
"$C" exec 2 "$SANSTAT" -a > "$TMP/stat2.txt" 2>&1
echo "--- sanstat on n1 (server host):"; cat "$TMP/stat1.txt"
echo "--- sanstat on n2:"; cat "$TMP/stat2.txt"
wait $CLIENTS 2>/dev/null
CLIENTS=
ok=1
grep -q "hello from local" "$TMP/local.out" || { echo "local client got: $(cat "$TMP/local.out")"; ok=0; }
grep -q "hello from remote" "$TMP/remote.out" || { echo "remote client got: $(cat "$TMP/remote.out")"; ok=0; }
# n1: the local client's connection to the server is shm. (The server's ends live in socat's fork
# children, which sanstat does not list: a fork child serves no control socket of its own.)
grep -E "^[0-9]+ +socat +[0-9]+ conn +shm +$A1:[0-9]+ +$A1:$PORT " "$TMP/stat1.txt" >/dev/null ||
  { echo "no shm connection to $A1:$PORT on n1"; ok=0; }
# n2: its client fell back to tcp and says why.
grep -E "^[0-9]+ +socat +[0-9]+ conn +tcp +$("$C" addr 2):[0-9]+ +$A1:$PORT " "$TMP/stat2.txt" |
  grep -qi "not on this host\|no provider" ||
  { echo "n2's client is not tcp with a reason"; ok=0; }

# Across hosts again with a program linked against libsan, which has the verbs provider (sanrun's
# preload library is built without it): no RDMA device here, so `auto` must fall back to TCP with
# a reason that names verbs' unavailability, and SAN_PROVIDER=verbs must too, with the documented
# "SAN_PROVIDER=verbs, but verbs: ..." reason. 256 KiB both ways at once, checked, then EOF.
PEER=$BUILD/bin/verbs_socket_peer
for provider in auto verbs; do
  timeout 60 "$C" exec 1 env SAN_PROVIDER=auto "$PEER" server "$A1" tcp 262144 \
    > "$TMP/ps-$provider.log" 2>&1 &
  PS=$!
  port=
  for i in $(seq 1 100); do
    port=$(sed -n 's/^port //p' "$TMP/ps-$provider.log"); [ -n "$port" ] && break; sleep 0.1
  done
  if [ "$provider" = auto ]; then why="peer is not on this host (no provider reaches it; verbs: "
  else why="SAN_PROVIDER=verbs, but verbs: "; fi
  timeout 60 "$C" exec 2 env SAN_PROVIDER=$provider "$PEER" client "$A1" "${port:-0}" tcp 262144 \
    "$why" > "$TMP/pc-$provider.log" 2>&1; crc=$?
  wait $PS; src=$?
  echo "--- libsan client on n2, SAN_PROVIDER=$provider (client rc $crc, server rc $src):"
  cat "$TMP/pc-$provider.log" "$TMP/ps-$provider.log"
  [ $crc = 0 ] && [ $src = 0 ] || { echo "SAN_PROVIDER=$provider across hosts: not tcp with a verbs reason"; ok=0; }
done
[ $ok = 1 ] || fail "see above"
echo "cluster_test: shm within a host, tcp across hosts (with the reason, verbs' too), bytes echoed: PASS"
