#!/bin/sh
# The DESTDIR install (stage.sh): the public parts are there, nothing private or test-only is, the
# systemd units and inetd/xinetd lines name programs and files the install really put at the
# configured prefix, and the installed sanrun preloads the installed libsan_preload.so.
. "$(dirname "$0")/common.sh"
ROOT=$WORK/destdir
LIB=$STAGED/$SAN_INSTALL_LIBDIR

for f in "$SAN_INSTALL_BINDIR/sanrun" "$SAN_INSTALL_SBINDIR/sanstat" \
         "$SAN_INSTALL_LIBDIR/libsan.so.0" "$SAN_INSTALL_LIBDIR/libsan.so" \
         "$SAN_INSTALL_LIBDIR/libsan.a" "$SAN_INSTALL_LIBDIR/libsan_compat.a" \
         "$SAN_INSTALL_LIBDIR/libsan_preload.so" "$SAN_INSTALL_LIBDIR/pkgconfig/san.pc" \
         "$SAN_INSTALL_LIBDIR/cmake/sanlib/sanlib-config.cmake" include/san/san.h \
         $SAN_INSTALL_PARTS; do
  [ -e "$STAGED/$f" ] || fail "$f is not installed"
done

# Public headers only; no test programs, fixtures or build-internal archives.
headers=$(cd "$STAGED/include" && find . -type f | sort | tr '\n' ' ')
case "$headers" in
  "./rpcvia/rpcvia.h ./san/san.h " | "./san/san.h ") ;;
  *) fail "headers other than san/san.h and rpcvia/rpcvia.h installed: $headers" ;;
esac
private=$(find "$ROOT" \( -name '*_test' -o -name '*fixture*' -o -name 'startup_*' \
                          -o -name 'libsan_common.a' -o -name 'libsan_socket.a' \) -print)
[ -z "$private" ] || fail "test or internal files installed: $private"

# Every absolute path a unit, inetd line or xinetd file names for a program or ftpd.conf must be
# installed, under the prefix that install used (the data directory /srv/drpc and the drpc token
# are the admin's to make). Checked for both installs: with DESTDIR (files under $1, paths
# naming the configured prefix $2) and with --prefix (files and paths both under it: no path
# of the configured prefix may remain).
checked=0
check_units() {
  root=$1 prefix=$2 other=$3
  for f in $(find "$root$prefix" -name '*.service' -o -name '*.socket' -o -name 'inetd.conf' \
                  -o -name 'xinetd.ftpd'); do
    for path in $(grep -v '^#' "$f" | grep -o '/[A-Za-z0-9_./@-]*' | sort -u); do
      case "$path" in
        "$prefix"/sbin/* | "$prefix"/bin/* | */ftpd/ftpd.conf)
          [ -e "$root$path" ] || fail "$f names $path, which is not installed"
          checked=$((checked + 1)) ;;
      esac
      case "$path" in
        "$other"/*) fail "$f names $path, under $other rather than $prefix" ;;
      esac
    done
  done
}
check_units "$ROOT" "$SAN_INSTALL_PREFIX" "$PREFIX"
check_units "" "$PREFIX" "$SAN_INSTALL_PREFIX"
[ "$checked" -ge 12 ] || fail "only $checked installed paths found in the units and inetd lines"

# The installed sanrun preloads the library installed beside it, wherever the tree was staged.
preload=$("$STAGED/$SAN_INSTALL_BINDIR/sanrun" -v -- true 2>&1 | sed -n 's/^sanrun: LD_PRELOAD=//p')
[ "$preload" = "$(realpath "$LIB/libsan_preload.so")" ] ||
  fail "installed sanrun preloads '$preload', not $LIB/libsan_preload.so"
echo "layout ok: $checked unit/inetd paths checked; sanrun preloads $preload"
