#!/bin/sh
# The shape of libsan_preload.so, which every program started under sanrun loads (and every
# exec of such a program loads again): what it costs a program that never opens a socket.
#   1. it needs nothing but the C library (and libm in unoptimised builds): the C++ runtime is
#      linked in (compat/CMakeLists.txt);
#   2. it carries none of the C++ runtime's stream and locale code: std::ifstream alone brought
#      in 40 % of the library (common/small_file.h reads files instead), and the relocations and
#      page faults of that code were paid at every exec (issue 17's process-cost rows);
#   3. it exports only the interposed calls and the C API (the version script), so it never
#      stands in for a C++ runtime symbol of the program's;
#   4. it makes its system calls through its own trap (common/raw_syscall.h), never through
#      libc's syscall(): a fork child's first call of it, bound lazily, cost a symbol look-up, a
#      copy-on-write fault on the GOT and faults on libc's code (6 page faults more per fork +
#      _exit under sanrun);
#   5. the code a fork child runs before it is back in the program (the child's fork handlers and
#      _exit: common/fork_path.h) lies within 64 KiB: a child has no page-table entries for the
#      library's code and faults in each 64 KiB it runs (fork + _exit of a process holding a
#      listener: 28.5 page faults under sanrun against 22 plain, 23.3 since).
# Arguments: the library, then the static libraries of sanlib's own code linked into it.
set -eu
LIB=$1
shift
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
fork_path='^(san::Runtime::AfterForkChild\(\)|san::Runtime::AtQuickExit\(\)|san::Runtime::Get\(\)|san::RefreshThisPid\(\)|san::KernelPid\(\)|san::Syscall6\(.*\)|san::ConnectionThread::AfterForkChildAlone\(\)|san::NoteForkChild\(\)|san::AfterLateFork\(bool, bool\)|san::SocketTable::ForEachPlain\(.*\)|san::ForkHeldMutex::AfterFork\(\)|san::late_holders::TakeReservation\(.*\)|_exit)$'
# nm pads addresses to one width: sorted as text they are sorted as numbers.
addrs=$(nm -C --defined-only "$LIB" | awk -v re="$fork_path" '$2 ~ /^[tT]$/ { a = $1; $1 = ""; $2 = ""; sub(/^ +/, ""); if ($0 ~ re) print a }' | sort)
span="$(echo "$addrs" | grep -c . || true) $(( 0x$(echo "$addrs" | tail -n 1) - 0x$(echo "$addrs" | head -n 1) ))"
found=${span% *}
[ "$found" -ge 13 ] || fail "only $found of the fork child's 13 functions found in $LIB (renamed? update fork_path)"
[ "${span#* }" -lt 65536 ] || fail "the fork child's functions span ${span#* } bytes of $LIB (SAN_FORK_PATH missing on one?)"
# sanlib's own code only: the static C++ runtime linked in keeps its futex calls through syscall()
# (contended locks and guards, which a fork child does not reach).
case $(uname -m) in
x86_64 | aarch64) ;;
*) shift $# ;;  # elsewhere raw_syscall.cc itself calls libc's syscall()
esac
for archive in "$@"; do
  [ -f "$archive" ] || fail "no archive $archive"
  nm -A -u "$archive" > /dev/null || fail "nm cannot read $archive"
  users=$(nm -A -u "$archive" 2>/dev/null | awk '$NF == "syscall" { sub(/:$/, "", $1); print $1 }' | sort -u)
  [ -z "$users" ] || fail "$(echo "$users" | tr '\n' ' ')call libc's syscall() (use san::Syscall, common/raw_syscall.h)"
done
echo "ok: needs $needed; no stream or locale code; exports $(nm -D --defined-only "$LIB" | wc -l) C symbols; the fork child's code within ${span#* } bytes"
