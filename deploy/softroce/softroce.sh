#!/bin/bash
# softroce.sh - runs sanlib's verbs tests against real libibverbs/librdmacm on Soft-RoCE (rdma_rxe)
# inside a QEMU guest, on a host whose own kernel has no RDMA.
#
# Nothing is built in the guest, and nothing of the host is copied into it except a handful of
# kernel modules: the guest boots Debian's kernel (the .deb is fetched with `apt-get download` and
# extracted, never installed) with a tiny busybox initramfs, mounts the HOST'S ROOT FILESYSTEM
# read-only over virtio-9p and chroots into it. So the guest runs the host's own binaries against
# the host's own libraries (libibverbs + the rxe provider, librdmacm, libstdc++, libasan for the
# sanitizer build...), straight out of the build directory, with the guest's kernel underneath:
# rdma_rxe on a veth pair, rdma_cm, uverbs.
#
# Usage: softroce.sh BUILD_DIR            run deploy/softroce/guest_tests.sh in one guest
#        MODE=pair softroce.sh BUILD_DIR  two guests joined by a QEMU UDP link (RoCEv2 frames
#                                         really cross between two guest kernels): san-verbs-bench
# Exit: 0 every guest test passed; 1 something failed (the guest's log says what); 77 cannot run
#       here (no QEMU, no kernel package, ...): ctest reports SKIP (SKIP_RETURN_CODE 77).
# Env:  SAN_SOFTROCE_CACHE (default /var/tmp/san-softroce): kernel + initramfs, reused.
#       SAN_SOFTROCE_LOG: where the guest's console goes (default $CACHE/guest-<pid>.log).
#       SAN_SOFTROCE_TIMEOUT: seconds for the whole guest run (default 360).
#       SAN_SOFTROCE_FILTER: which suites the guest runs: all (default), conformance, verbs,
#         sockets (verbs_socket_test only), bench.
#       SAN_SOFTROCE_GTEST_FILTER: a --gtest_filter for every GoogleTest binary (developers).
#       SAN_LOG: passed on to the guest's programs (e.g. debug).
#
# Facts this relies on (learned the hard way, see also shared/tools/README.md):
#   * rdma_rxe needs the crypto "crc32" shash: load crc32_generic first, and the kernel's
#     request_module needs /sbin/modprobe to exist.
#   * Two rxe devices in one guest cannot talk to each other: one device, both peers on it.
#   * One or two emulated CPUs: peers must wait on completion channels, never busy-poll (sanlib
#     spins briefly then sleeps on notify_fd).
#   * Everything is TCG-emulated: numbers are functional evidence, not RDMA performance.
set -uo pipefail

skip() { echo "SKIP: softroce: $*" >&2; exit 77; }
die() { echo "FAIL: softroce: $*" >&2; exit 1; }

BUILD_DIR=${1:-}
[ -n "$BUILD_DIR" ] && [ -d "$BUILD_DIR" ] || die "usage: $0 BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd -P)
HERE=$(cd "$(dirname "$0")" && pwd -P)
MODE=${MODE:-single}
CACHE=${SAN_SOFTROCE_CACHE:-/var/tmp/san-softroce}
TIMEOUT=${SAN_SOFTROCE_TIMEOUT:-360}

for tool in qemu-system-x86_64 busybox cpio depmod modprobe dpkg-deb apt-cache gzip; do
  command -v "$tool" >/dev/null 2>&1 || skip "'$tool' not installed (apt install qemu-system-x86 busybox-static cpio kmod)"
done
busybox --list >/dev/null 2>&1 || skip "busybox is not usable"
file -L "$(command -v busybox)" 2>/dev/null | grep -q "dynamically linked" &&
  skip "busybox is dynamically linked: install busybox-static"
for f in /usr/bin/rdma /usr/sbin/ip; do
  [ -x "$f" ] || skip "$f missing (apt install iproute2)"
done
[ -e /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so ] || ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 ||
  skip "the rxe verbs provider is missing (apt install ibverbs-providers)"

mkdir -p "$CACHE" || skip "cannot create $CACHE"
exec 9>"$CACHE/.lock"
flock -w 600 9 || skip "another softroce run holds $CACHE/.lock"

# ---- the guest kernel: Debian's current one, extracted from its package ----
KVER=${KVER:-$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/.*Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -1)}
[ -n "$KVER" ] || KVER=$(ls "$CACHE"/kernel 2>/dev/null | sed -n 's/^vmlinuz-//p' | head -1)
[ -n "$KVER" ] || skip "cannot tell which Debian kernel to use (apt-get update?)"
KDIR=$CACHE/kernel-$KVER
if [ ! -f "$KDIR/boot/vmlinuz-$KVER" ]; then
  rm -rf "$KDIR.tmp"; mkdir -p "$KDIR.tmp"
  (cd "$KDIR.tmp" && apt-get download "linux-image-$KVER" >/dev/null 2>&1) ||
    skip "cannot download linux-image-$KVER with apt-get (no Debian mirror reachable?)"
  dpkg-deb -x "$KDIR.tmp"/linux-image-*.deb "$KDIR.tmp/root" || die "dpkg-deb -x failed"
  depmod -b "$KDIR.tmp/root" "$KVER" || die "depmod failed"
  rm -rf "$KDIR"; mv "$KDIR.tmp/root" "$KDIR"; rm -rf "$KDIR.tmp"
fi

# ---- the initramfs: busybox, the guest kernel's modules, our /init. Rebuilt when init changes ----
INITRD=$CACHE/initrd-$KVER-$(cat "$HERE/guest_init.sh" | md5sum | cut -c1-12).img
if [ ! -f "$INITRD" ]; then
  R=$(mktemp -d "$CACHE/root.XXXXXX")
  mkdir -p "$R"/{bin,sbin,proc,sys,dev,host,usr/lib/modules}
  ln -s usr/lib "$R/lib"
  cp "$(command -v busybox)" "$R/bin/busybox"
  for a in $("$R/bin/busybox" --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
  ln -sf ../bin/busybox "$R/sbin/modprobe"   # the kernel's request_module() helper
  MODS="rdma_rxe ib_uverbs rdma_ucm veth 9p 9pnet_virtio virtio_pci virtio_net crc32_generic"
  for m in $MODS; do
    modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}'
  done | sort -u | while read -r ko; do
    rel=${ko#"$KDIR"/}; mkdir -p "$R/usr/$(dirname "$rel")"; cp "$ko" "$R/usr/$rel"
  done
  cp "$KDIR/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$R/usr/lib/modules/$KVER/" 2>/dev/null
  depmod -b "$R/usr" "$KVER" || die "depmod (initramfs) failed"
  install -m 755 "$HERE/guest_init.sh" "$R/init"
  (cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$INITRD.tmp") && mv "$INITRD.tmp" "$INITRD"
  rm -rf "$R"
fi

LOG=${SAN_SOFTROCE_LOG:-$CACHE/guest-$$.log}
# The host's root, read-only, for its programs and libraries; this repository and the build dir
# as shares of their own, mounted at the same paths: the guest puts fresh tmpfs on /tmp, /run and
# /var/tmp, which would hide a checkout or build dir living there (a CI clone in /tmp did).
SRC_ROOT=$(cd "$HERE/../.." && pwd)
QARGS=(-accel tcg -m 2048 -nographic -no-reboot
       -kernel "$KDIR/boot/vmlinuz-$KVER" -initrd "$INITRD"
       -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
       -virtfs "local,path=$SRC_ROOT,mount_tag=hostsrc,security_model=none,readonly=on,multidevs=remap"
       -virtfs "local,path=$BUILD_DIR,mount_tag=hostbuild,security_model=none,readonly=on,multidevs=remap")
APPEND="console=ttyS0 quiet panic=-1 rdinit=/init san_build=$BUILD_DIR san_src=$SRC_ROOT san_here=$HERE san_filter=${SAN_SOFTROCE_FILTER:-all}${SAN_SOFTROCE_GTEST_FILTER:+ san_gfilter=$SAN_SOFTROCE_GTEST_FILTER}${SAN_LOG:+ san_log=$SAN_LOG}"
S=$(date +%s)
if [ "$MODE" = pair ]; then
  # Two guests, rxe on each one's virtio NIC, joined by a QEMU UDP socket link on 127.0.0.1.
  PORT=$(( 20000 + ($$ % 20000) ))
  timeout "$TIMEOUT" qemu-system-x86_64 "${QARGS[@]}" -smp 1 \
    -append "$APPEND san_role=server" \
    -netdev "socket,id=n0,udp=127.0.0.1:$((PORT+1)),localaddr=127.0.0.1:$PORT" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:5a:00:01 > "$LOG.server" 2>&1 &
  SPID=$!
  timeout "$TIMEOUT" qemu-system-x86_64 "${QARGS[@]}" -smp 1 \
    -append "$APPEND san_role=client" \
    -netdev "socket,id=n0,udp=127.0.0.1:$PORT,localaddr=127.0.0.1:$((PORT+1))" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:5a:00:02 > "$LOG.client" 2>&1
  wait "$SPID"
  cat "$LOG.server" "$LOG.client" > "$LOG"
else
  timeout "$TIMEOUT" qemu-system-x86_64 "${QARGS[@]}" -smp 2 -nic none -append "$APPEND" > "$LOG" 2>&1
fi
QRC=$?
echo "softroce: guest run took $(( $(date +%s) - S )) s (qemu rc $QRC); console log: $LOG"
grep -E '^(=== |\[ *(PASSED|FAILED|SKIPPED) *\]|SAN-)' "$LOG" | tr -d '\r'
if grep -q "SAN-SOFTROCE-SETUP-FAILED" "$LOG"; then
  die "the guest could not set up Soft-RoCE (see $LOG)"
fi
SUMMARY=$(grep -a 'SAN-SOFTROCE-SUMMARY' "$LOG" | tail -1 | tr -d '\r')
[ -n "$SUMMARY" ] || die "the guest did not finish (timeout ${TIMEOUT}s or crash; see $LOG)"
case "$SUMMARY" in
  *" failed=0"*) echo "softroce: all guest tests passed"; exit 0 ;;
  *) echo "---- the guest's output (last 200 lines):"
     sed -n '/host root mounted/,$p' "$LOG" | tr -d '\r' | tail -200
     die "guest tests failed: $SUMMARY" ;;
esac
