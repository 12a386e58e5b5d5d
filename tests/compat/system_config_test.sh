#!/bin/sh
# The system-wide settings file end to end (common/config_file.h, san(7)): a preloaded program
# under sanrun, with SAN_CONFIG_FILE pointing at a scratch file, makes one local connection to
# itself; SAN_REPORT says whether it ran over shared memory (shm_connections) or not.
#   1. bad setting and rule lines are reported as file:line:column and ignored; the good deny
#      rule still applies (no shm connection);
#   2. the file's settings apply (SAN_PROVIDER = off: no shm connection) ...
#   3. ... unless the environment sets the variable (SAN_PROVIDER=auto wins: shm);
#   4. sanrun's own default set-up is late (it sets SAN_SETUP=late; the short connection stays
#      kernel TCP) ...
#   5. ... unless the file or the environment says SAN_SETUP (eager: the connection is shm);
#   6. SAN_RULES_FILE: read and applied, or reported when it cannot be read.
# Cases 1-3 run with SAN_SETUP=eager, so that the one short connection would be shm.
# Arguments: sanrun, a scratch directory.
set -eu
SANRUN=$1
WORK=$2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
rm -rf "$WORK"
mkdir -p "$WORK"
# One connection of the program to itself, a byte each way.
PROGRAM='import os, socket
print("setup=%s" % os.environ.get("SAN_SETUP"))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
c.sendall(b"x"); assert a.recv(1) == b"x"'

# run NAME [VAR=VALUE...]: runs the program with $WORK/NAME.conf; prints its shm_connections.
run() {
  name=$1
  shift
  rm -f "$WORK/$name.report"
  env SAN_CONFIG_FILE="$WORK/$name.conf" SAN_REPORT="$WORK/$name.report" "$@" \
      "$SANRUN" -- python3 -c "$PROGRAM" > "$WORK/$name.out" 2>&1 ||
    fail "$name: the program failed: $(cat "$WORK/$name.out")"
  # No report at all: the process made no SAN socket.
  [ -e "$WORK/$name.report" ] || { echo 0; return; }
  sed -n 's/.*prog=python3.* shm_connections=\([0-9]*\).*/\1/p' "$WORK/$name.report"
}

cat > "$WORK/bad.conf" <<'CONF'
# a system-wide settings file with two unusable lines
SAN_WINDOW = plenty
  allow port=notaport
deny
CONF
shm=$(run bad SAN_SETUP=eager)
grep -q "$WORK/bad.conf:2:14: SAN_WINDOW=plenty is not valid; line ignored" "$WORK/bad.out" ||
  fail "the bad setting line was not reported at 2:14: $(cat "$WORK/bad.out")"
grep -q "$WORK/bad.conf:3:[0-9]*: .*; line ignored" "$WORK/bad.out" ||
  fail "the bad rule line was not reported at line 3: $(cat "$WORK/bad.out")"
[ "$shm" = 0 ] || fail "the file's deny rule did not apply (shm_connections=$shm)"

echo "SAN_PROVIDER = off" > "$WORK/off.conf"
shm=$(run off SAN_SETUP=eager)
[ "$shm" = 0 ] || fail "the file's SAN_PROVIDER = off did not apply (shm_connections=$shm)"
shm=$(run off SAN_SETUP=eager SAN_PROVIDER=auto)
[ "${shm:-0}" -ge 1 ] || fail "the environment's SAN_PROVIDER=auto did not win (shm_connections=$shm)"
: > "$WORK/none.conf"
shm=$(run none)
grep -q "setup=late" "$WORK/none.out" || fail "sanrun did not default to late: $(cat "$WORK/none.out")"
[ "${shm:-0}" = 0 ] || fail "a short connection moved to shm under the late set-up (shm=$shm)"
echo "SAN_SETUP = eager" > "$WORK/eager.conf"
shm=$(run eager)
grep -q "setup=None" "$WORK/eager.out" ||
  fail "sanrun overrode the file's SAN_SETUP: $(cat "$WORK/eager.out")"
[ "${shm:-0}" -ge 1 ] || fail "the file's SAN_SETUP = eager did not apply (shm_connections=$shm)"
shm=$(run none SAN_SETUP=eager)
[ "${shm:-0}" -ge 1 ] || fail "the environment's SAN_SETUP=eager did not win (shm_connections=$shm)"
# SAN_RULES_FILE (common/small_file.h reads it): its rules apply; an empty one allows; one that
# cannot be read is reported and leaves every socket plain.
: > "$WORK/rules.conf"
echo "deny" > "$WORK/deny.rules"
shm=$(run rules SAN_SETUP=eager SAN_RULES_FILE="$WORK/deny.rules")
[ "$shm" = 0 ] || fail "the rules file's deny did not apply (shm_connections=$shm)"
: > "$WORK/empty.rules"
shm=$(run rules SAN_SETUP=eager SAN_RULES_FILE="$WORK/empty.rules")
[ "${shm:-0}" -ge 1 ] || fail "an empty rules file did not leave shm allowed (shm_connections=$shm)"
shm=$(run rules SAN_SETUP=eager SAN_RULES_FILE="$WORK/missing.rules")
grep -q "SAN_RULES_FILE $WORK/missing.rules: cannot be read" "$WORK/rules.out" ||
  fail "an unreadable rules file was not reported: $(cat "$WORK/rules.out")"
[ "$shm" = 0 ] || fail "an unreadable rules file left shm on (shm_connections=$shm)"
echo "bad lines reported and ignored; file settings and rules apply; the environment wins;" \
  "sanrun defaults to the late set-up unless told otherwise; rules files read or reported"
