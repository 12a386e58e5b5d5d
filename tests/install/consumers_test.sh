#!/bin/sh
# Out-of-tree programs built from the --prefix install alone (stage.sh): a C program with
# `pkg-config --cflags --libs san`, a CMake project with find_package(sanlib CONFIG) (shared,
# static, linked-in compat, rpcvia), the same source built without sanlib as a plain peer, and a
# plain program under the installed sanrun. Pairs of them echo a message; each end says whether
# the connection ran over shared memory (shm) or fell back to kernel TCP (tcp).
. "$(dirname "$0")/common.sh"
OUT=$WORK/consumers
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
export LD_LIBRARY_PATH="$PREFIX/$SAN_INSTALL_LIBDIR"
export PKG_CONFIG_PATH="$PREFIX/$SAN_INSTALL_LIBDIR/pkgconfig"

# shellcheck disable=SC2086,SC2046  # word splitting of flags is intended
cc $CFLAGS -o echo_peer_pc "$SRC/consumer/echo_peer.c" $(pkg-config --cflags --libs san)
cc -Wall -Wextra -DECHO_PEER_PLAIN -o echo_peer_plain "$SRC/consumer/echo_peer.c"
cmake -S "$SRC/consumer" -B cmake -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$SAN_INSTALL_CFLAGS" > cmake.log 2>&1 ||
  { cat cmake.log; fail "the CMake consumer does not configure"; }
cmake --build cmake > build.log 2>&1 || { cat build.log; fail "the CMake consumer does not build"; }
ldd echo_peer_pc | grep -q "$PREFIX/$SAN_INSTALL_LIBDIR/libsan.so.0" ||
  fail "echo_peer_pc does not use the installed libsan: $(ldd echo_peer_pc | grep san)"

# pair NAME "server command" "client command" expected-server-mode expected-client-mode
pair() {
  rm -f port server.out client.out
  # shellcheck disable=SC2086
  $2 serve port > server.out 2> server.err &
  server=$!
  wait_for_file port "$server"
  # shellcheck disable=SC2086
  $3 call "$(cat port)" "hello from $1" > client.out 2> client.err ||
    { cat client.err; fail "$1: the client failed"; }
  wait "$server" || { cat server.err; fail "$1: the server failed"; }
  [ "$(cat server.out) $(cat client.out)" = "$4 $5" ] ||
    fail "$1: modes '$(cat server.out) $(cat client.out)', expected '$4 $5'"
  echo "$1: $4 $5"
}
pair "cmake(shared) <- pkg-config" cmake/echo_peer_shared ./echo_peer_pc shm shm
pair "pkg-config <- cmake(static)" ./echo_peer_pc cmake/echo_peer_static shm shm
pair "cmake(compat) <- pkg-config" cmake/echo_peer_compat ./echo_peer_pc kernel shm
pair "plain <- pkg-config" ./echo_peer_plain ./echo_peer_pc kernel tcp
pair "pkg-config <- plain" ./echo_peer_pc ./echo_peer_plain tcp kernel
pair "sanrun plain <- pkg-config" \
     "$PREFIX/$SAN_INSTALL_BINDIR/sanrun --set SAN_SETUP=eager -- ./echo_peer_plain" \
     ./echo_peer_pc kernel shm
[ "$(cmake/rpcvia_version)" = via ] || fail "the sanlib::rpcvia program does not run"
