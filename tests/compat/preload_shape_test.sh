#!/bin/sh
# The shape of libsan_preload.so, which every program started under sanrun loads (and every
# exec of such a program loads again): what it costs a program that never opens a socket.
#   1. it needs nothing but the C library (and libm in unoptimised builds): the C++ runtime is
#      linked in (compat/CMakeLists.txt);
#   2. it carries none of the C++ runtime's stream and locale code: std::ifstream alone brought
#      in 40 % of the library (common/small_file.h reads files instead), and the relocations and
#      page faults of that code were paid at every exec (issue 17's process-cost rows);
#   3. it exports only the interposed calls and the C API (the version script), so it never
#      stands in for a C++ runtime symbol of the program's.
# Argument: the library.
set -eu
LIB=$1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
needed=$(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
for n in $needed; do
  case $n in
  libc.so.* | libm.so.* | ld-linux*) ;;
  *) fail "$LIB needs $n (needed: $needed)" ;;
  esac
done
streams=$(nm -C "$LIB" | grep -cE 'std::(__cxx11::)?(basic_filebuf|basic_ifstream|basic_istringstream|basic_ostringstream|locale::classic|ios_base::Init)' || true)
[ "$streams" -eq 0 ] || fail "$LIB carries $streams stream/locale symbols: $(nm -C "$LIB" | grep -E 'std::(__cxx11::)?(basic_filebuf|basic_ifstream|locale::classic|ios_base::Init)' | head -3)"
exported=$(nm -D --defined-only "$LIB" | awk '{print $3}' | grep -vE '^(san_|__)' | grep -cE '^_Z' || true)
[ "$exported" -eq 0 ] || fail "$LIB exports $exported C++ symbols"
echo "ok: needs $needed; no stream or locale code; exports $(nm -D --defined-only "$LIB" | wc -l) C symbols"
