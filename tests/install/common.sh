# Sourced by the tests/install scripts. stage.sh installed the build twice under $SAN_INSTALL_WORK:
#   destdir/<configured prefix>   DESTDIR=destdir cmake --install (as a package build stages it)
#   prefix/                       cmake --install --prefix prefix: a real prefix, which the
#                                 out-of-tree consumers build against
# The variables SAN_INSTALL_* come from tests/install/CMakeLists.txt.
set -eu
WORK=$SAN_INSTALL_WORK
SRC=$SAN_INSTALL_SOURCE
STAGED=$WORK/destdir$SAN_INSTALL_PREFIX
PREFIX=$WORK/prefix
# Consumers are built with the build's sanitizers: the installed static archives are instrumented.
CFLAGS="-Wall -Wextra $SAN_INSTALL_CFLAGS"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Waits for a file a background process writes (no time limit of its own: ctest's TIMEOUT is).
wait_for_file() {
  while [ ! -s "$1" ]; do
    kill -0 "$2" 2>/dev/null || fail "process $2 exited before writing $1"
    sleep 0.05
  done
}
