#!/bin/bash
# cluster.sh - a multi-host cluster on one machine, without RDMA: N network namespaces ("hosts"
# n1..nN) on a test subnet of their own, joined by a bridge that lives in a hub namespace (the
# machine's own namespace is not touched). Each namespace is another host to sanlib: abstract Unix
# sockets (the shm rendezvous, the sanstat control sockets) and interface addresses are per
# namespace, so connections inside a host take shm and connections between hosts fall back to TCP.
#
# Usage (root):
#   cluster.sh up N        create hosts n1..nN: nI has eth0 = $SUBNET.I/24 (and lo)
#   cluster.sh down        remove them (and the hub)
#   cluster.sh exec I CMD  run CMD on host nI (ip netns exec)
#   cluster.sh addr I      print host nI's address
#   cluster.sh status      list the hosts
# Env: SAN_CLUSTER_PREFIX (default "san"): namespace names $PREFIX-n1.., $PREFIX-hub;
#      SAN_CLUSTER_SUBNET (default 10.213.0): the /24 the hosts live on.
set -euo pipefail
PREFIX=${SAN_CLUSTER_PREFIX:-san}
SUBNET=${SAN_CLUSTER_SUBNET:-10.213.0}
HUB=$PREFIX-hub

die() { echo "cluster.sh: $*" >&2; exit 1; }
host() { echo "$PREFIX-n$1"; }

up() {
  local n=$1
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "N must be 1..250"
  ip netns add "$HUB"
  ip -n "$HUB" link add br0 type bridge
  ip -n "$HUB" link set br0 up
  ip -n "$HUB" link set lo up
  for i in $(seq 1 "$n"); do
    local ns; ns=$(host "$i")
    ip netns add "$ns"
    # The veth pair is made inside the hub, then one end moves to the host as its eth0.
    ip -n "$HUB" link add "h$i" type veth peer name "eth0-$i"
    ip -n "$HUB" link set "eth0-$i" netns "$ns"
    ip -n "$ns" link set "eth0-$i" name eth0
    ip -n "$HUB" link set "h$i" master br0
    ip -n "$HUB" link set "h$i" up
    ip -n "$ns" addr add "$SUBNET.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

down() {
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$PREFIX-(n[0-9]+|hub)$" || true); do
    ip netns del "$ns"
  done
}

case ${1:-} in
  up) [ $# -eq 2 ] || die "usage: cluster.sh up N"; up "$2" ;;
  down) down ;;
  exec) [ $# -ge 3 ] || die "usage: cluster.sh exec I CMD..."; i=$2; shift 2; exec ip netns exec "$(host "$i")" "$@" ;;
  addr) [ $# -eq 2 ] || die "usage: cluster.sh addr I"; echo "$SUBNET.$2" ;;
  status) ip netns list | grep -E "^$PREFIX-" || echo "no hosts" ;;
  *) die "usage: cluster.sh up N | down | exec I CMD... | addr I | status" ;;
esac
