#!/bin/sh
# "via" from the --prefix install (stage.sh), built the obvious way: the installed rpcgen_via
# generates sanecho.x's code; the server is compiled with `pkg-config --cflags --libs rpcvia`,
# the hand-written client exactly as a user would (`cc ... -lrpcvia -lsan -ltirpc`), once with
# rpcgen_via's stubs and once with the system rpcgen's. Neither defines RPCGEN_VIA_TRANSPORT.
# RPCVIA_FALLBACK=fail: clnt_create fails unless the call really runs over the SAN path.
# Uses the real rpcbind, started if none runs, under the lock the other rpcbind tests take.
. "$(dirname "$0")/common.sh"
OUT=$WORK/rpcvia
rm -rf "$OUT"
mkdir -p "$OUT/via" "$OUT/sys"
export LD_LIBRARY_PATH="$PREFIX/$SAN_INSTALL_LIBDIR"
export PKG_CONFIG_PATH="$PREFIX/$SAN_INSTALL_LIBDIR/pkgconfig"
INC="-I$PREFIX/include -I/usr/include/tirpc"
LIBS="-L$PREFIX/$SAN_INSTALL_LIBDIR -lrpcvia -lsan -ltirpc"

cp "$SRC/rpc/sanecho.x" "$OUT/via/"
cp "$SRC/rpc/sanecho.x" "$OUT/sys/"
(cd "$OUT/via" && "$PREFIX/$SAN_INSTALL_BINDIR/rpcgen_via" sanecho.x)
(cd "$OUT/sys" && rpcgen sanecho.x)
cd "$OUT"
# shellcheck disable=SC2086,SC2046
cc $CFLAGS -Ivia -o server via/sanecho_svc.c via/sanecho_xdr.c "$SRC/rpc/sanecho_impl.c" \
   $(pkg-config --cflags --libs rpcvia)
# shellcheck disable=SC2086
cc $CFLAGS -Ivia $INC -o client_via via/sanecho_clnt.c via/sanecho_xdr.c \
   "$SRC/rpc/sanecho_client.c" $LIBS
# shellcheck disable=SC2086,SC2046  # the system rpcgen makes no _xdr.c without types, and its
# output is not warning-free
cc $SAN_INSTALL_CFLAGS -w -Isys $INC -o client_sys sys/sanecho_clnt.c $(ls sys/sanecho_xdr.c 2>/dev/null) \
   "$SRC/rpc/sanecho_client.c" $LIBS

exec 9> /tmp/sanlib_rpcbind_tests.lock
flock 9
rpcbind_pid=""
server=""
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  rpcinfo -d 0x20000779 1 2>/dev/null || true
  [ -z "$rpcbind_pid" ] || kill "$rpcbind_pid" 2>/dev/null || true
}
trap cleanup EXIT
if ! rpcinfo -p 127.0.0.1 > /dev/null 2>&1; then
  /usr/sbin/rpcbind -f > /dev/null 2>&1 &
  rpcbind_pid=$!
  until rpcinfo -p 127.0.0.1 > /dev/null 2>&1; do sleep 0.05; done
fi
rpcinfo -d 0x20000779 1 2>/dev/null || true
./server -s via > server.log 2>&1 &
server=$!
until rpcinfo -p 127.0.0.1 2>/dev/null | grep -q 536872825; do
  kill -0 "$server" 2>/dev/null || { cat server.log; fail "the via server exited"; }
  sleep 0.05
done
for client in client_via client_sys; do
  answer=$(RPCVIA_FALLBACK=fail "./$client" 127.0.0.1 2>&1) || fail "$client: $answer"
  [ "$answer" = 18 ] || fail "$client answered '$answer', not 18"
  echo "$client: via call answered $answer"
done
