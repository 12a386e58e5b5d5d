#!/bin/bash
# cluster_drpc_test.sh BUILD_DIR - drpc across "hosts": deploy/cluster/cluster.sh makes three
# network namespaces n1..n3 (each its own host to sanlib: a connection inside one takes shm, a
# connection between two falls back to kernel TCP). drpcd runs on n1 and n2; n3 is up but runs no
# drpcd (a host whose daemon is down). The CLI on n1 fans out over all three:
#   - san:// to n1 itself: shm (the node's Status says so);
#   - san:// to n2: another host, so TCP (the node says why);
#   - plain TCP to n2: kernel TCP;
#   - n3: reported as failed (connection refused), the others succeed, exit status 1;
#   - --json agrees; exec runs on both live hosts, each line prefixed with its host;
#   - push and pull on data connections: to n1 over shm, to n2 over TCP across hosts, byte-exact;
#   - the Unix-user check (drpcd --allow-uid 0 on n1): root on n1 is admitted without a token,
#     root on n2 is not (another host: its uid means nothing on n1).
# Exit 0 pass, 1 fail, 77 cannot run here (not root, no `ip netns`, not built): ctest SKIP.
set -uo pipefail
skip() { echo "SKIP: cluster_drpc_test: $*" >&2; exit 77; }
fail() { echo "FAIL: cluster_drpc_test: $*" >&2; exit 1; }

BUILD=${1:-}
SRC=${2:-}
[ -n "$BUILD" ] && [ -d "$BUILD" ] && [ -n "$SRC" ] || fail "usage: $0 BUILD_DIR SOURCE_DIR"
DRPC=$BUILD/bin/drpc; DRPCD=$BUILD/bin/drpcd
C="$SRC/deploy/cluster/cluster.sh"
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip (iproute2)"
[ -x "$C" ] || skip "no $C"
[ -x "$DRPC" ] && [ -x "$DRPCD" ] || skip "drpc/drpcd not built in $BUILD"
export SAN_CLUSTER_PREFIX=dct$$ SAN_CLUSTER_SUBNET=10.214.$(( $$ % 200 + 20 ))
TMP=$(mktemp -d)
PIDS=
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  "$C" down >/dev/null 2>&1
  rm -rf "$TMP"
}
trap cleanup EXIT
"$C" up 3 > "$TMP/up.log" 2>&1 || { cat "$TMP/up.log"; skip "cannot create network namespaces here"; }
A1=$("$C" addr 1); A2=$("$C" addr 2); A3=$("$C" addr 3)

TOKEN=$TMP/token
echo "cluster-token-0123456789abcdef" > "$TOKEN"
chmod 600 "$TOKEN"
# drpcd on n1 and n2, port chosen by the kernel (each host has its own port space).
for i in 1 2; do
  extra=; [ $i = 1 ] && extra="--allow-uid 0"
  mkdir -p "$TMP/root$i"
  "$C" exec $i "$DRPCD" --listen "$("$C" addr $i):0" --port-file "$TMP/port$i" $extra \
    --root "$TMP/root$i" \
    --token-file "$TOKEN" --allow-cmd /bin/echo --allow-cmd /bin/sh > "$TMP/drpcd$i.log" 2>&1 &
  PIDS="$PIDS $!"
done
for i in 1 2; do
  for _ in $(seq 1 200); do [ -s "$TMP/port$i" ] && break; sleep 0.05; done
  [ -s "$TMP/port$i" ] || { cat "$TMP/drpcd$i.log"; fail "drpcd on n$i did not start"; }
done
P1=$(cat "$TMP/port1"); P2=$(cat "$TMP/port2")
N1=san://$A1:$P1; N2S=san://$A2:$P2; N2T=$A2:$P2; N3=san://$A3:$P1  # nobody listens on n3

drpc() { "$C" exec 1 "$DRPC" --token-file "$TOKEN" --connect-timeout 3 --timeout 20 "$@"; }
ok=1
check() { # description, command...; sets ok=0 on failure
  local what=$1; shift
  "$@" || { echo "not as expected: $what"; ok=0; }
}

# Status: per-host transport as each node sees it; n3 down.
drpc --hosts "$N1,$N2S,$N2T,$N3" status > "$TMP/status.out" 2> "$TMP/status.err"
rc=$?
echo "--- status (exit $rc):"; cat "$TMP/status.out" "$TMP/status.err"
check "status exit 1" test $rc = 1
check "n1 over san is shm" grep -Eq "^$N1: .*transport shm" "$TMP/status.out"
check "n2 over san fell back to tcp with a reason" grep -Eq "^$N2S: .*transport tcp \(" "$TMP/status.out"
check "n2 over tcp" grep -Eq "^$N2T: .*transport tcp" "$TMP/status.out"
check "n3 reported" grep -q "^$N3: error: connect $A3:$P1: Connection refused" "$TMP/status.err"
check "summary" grep -q "1 of 4 nodes failed" "$TMP/status.err"

# Exec on every host: the live ones run it, each line prefixed with its host.
drpc --hosts "$N1,$N2S,$N3" exec -- /bin/sh -c 'echo ran-$((40+2))' > "$TMP/exec.out" 2> "$TMP/exec.err"
rc=$?
echo "--- exec (exit $rc):"; cat "$TMP/exec.out" "$TMP/exec.err"
check "exec exit 1" test $rc = 1
check "exec on n1" grep -qx "$N1: ran-42" "$TMP/exec.out"
check "exec on n2" grep -qx "$N2S: ran-42" "$TMP/exec.out"
check "exec n3 reported" grep -q "^$N3: error: " "$TMP/exec.err"

# --json: the same verdicts, machine-readable.
drpc --json --hosts "$N1,$N2T,$N3" ping --count 5 > "$TMP/ping.json" 2>/dev/null
rc=$?
echo "--- ping --json (exit $rc):"; cat "$TMP/ping.json"
check "ping exit 1" test $rc = 1
check "json failed 1" grep -q '"failed":1' "$TMP/ping.json"
check "json n1 ok" grep -q "\"host\":\"$N1\",\"ok\":true" "$TMP/ping.json"
check "json n2 ok" grep -q "\"host\":\"$N2T\",\"ok\":true" "$TMP/ping.json"
check "json n3 failed" grep -q "\"host\":\"$N3\",\"ok\":false" "$TMP/ping.json"

# All live hosts only: exit 0.
drpc --hosts "$N1,$N2S" ping --count 3 > "$TMP/ping2.out" 2>&1
rc=$?
check "live hosts only: exit 0 (got $rc: $(cat "$TMP/ping2.out"))" test $rc = 0

# Push to both live hosts and pull back from each: the data connection is offered on the node's
# listen address and opened from another host (n2) as from the same one (n1).
head -c 3000000 /dev/urandom > "$TMP/payload"
drpc --hosts "$N1,$N2S" push "$TMP/payload" payload > "$TMP/push.out" 2>&1
rc=$?
echo "--- push (exit $rc):"; cat "$TMP/push.out"
check "push exit 0" test $rc = 0
check "push to n1 on a data connection" grep -q "^$N1: pushed 3000000 bytes .*data connection" "$TMP/push.out"
check "push to n2 on a data connection" grep -q "^$N2S: pushed 3000000 bytes .*data connection" "$TMP/push.out"
check "n1 has it" cmp -s "$TMP/payload" "$TMP/root1/payload"
check "n2 has it" cmp -s "$TMP/payload" "$TMP/root2/payload"
drpc --hosts "$N2T" pull payload "$TMP/back" > "$TMP/pull.out" 2>&1
rc=$?
echo "--- pull from n2 over tcp (exit $rc):"; cat "$TMP/pull.out"
check "pull exit 0" test $rc = 0
check "pulled byte-exact" cmp -s "$TMP/payload" "$TMP/back"

# Unix-user check: no token, from n1 itself (admitted: root, local) and from n2 (refused).
"$C" exec 1 "$DRPC" --hosts "$N1,$A1:$P1" status > "$TMP/uid1.out" 2>&1
rc=$?
echo "--- status without a token from n1 (exit $rc):"; cat "$TMP/uid1.out"
check "root on n1 admitted by uid, san and tcp" test $rc = 0
"$C" exec 2 "$DRPC" --hosts "$N1,$A1:$P1" status > "$TMP/uid2.out" 2>&1
rc=$?
echo "--- status without a token from n2 (exit $rc):"; cat "$TMP/uid2.out"
check "root on n2 refused by n1" test $rc = 1
check "n2 told why" grep -q "not a local user's connection" "$TMP/uid2.out"

[ $ok = 1 ] || { echo "--- drpcd logs:"; cat "$TMP"/drpcd*.log; fail "see above"; }
echo "cluster_drpc_test: fan-out over 3 hosts, shm inside a host, tcp across, host down reported: PASS"
