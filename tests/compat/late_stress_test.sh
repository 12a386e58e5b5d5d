#!/bin/sh
# The late move's chaos test (late_stress.c) under sanrun: 30 runs of 20 connections, each
# carrying 2 MB both ways at once, moving to shm at random points of the traffic (a low
# SAN_UPGRADE_BYTES). Fails on any lost, repeated or altered byte, any reset or stall, and when a
# run moved no connection at either end (then it would test nothing).
#   late_stress_test.sh SANRUN LATE_STRESS
set -u
sanrun=$1
stress=$2
failed=0
for seed in $(seq 1 30); do
  out=$(SAN_SETUP=late SAN_UPGRADE_BYTES=65536 "$sanrun" "$stress" 20 2000000 "$seed" 2>&1)
  rc=$?
  moved_client=$(printf '%s\n' "$out" | sed -n 's/^client: .* moved=\([0-9]*\)\/.*/\1/p')
  moved_server=$(printf '%s\n' "$out" | sed -n 's/^server: .* moved=\([0-9]*\)\/.*/\1/p')
  if [ "$rc" -ne 0 ] || [ "${moved_client:-0}" -eq 0 ] || [ "${moved_server:-0}" -eq 0 ]; then
    echo "seed $seed: exit $rc, moved client=${moved_client:-?} server=${moved_server:-?}"
    printf '%s\n' "$out" | tail -5
    failed=$((failed + 1))
  fi
done
echo "late_stress: $failed of 30 runs failed"
[ "$failed" -eq 0 ]
