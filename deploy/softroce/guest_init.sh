#!/bin/sh
# /init of the softroce guest (busybox). Loads rdma_rxe and friends, mounts the host's root
# read-only over 9p, chroots into it and runs deploy/softroce/guest_tests.sh from the host's tree.
# Prints SAN-SOFTROCE-SETUP-FAILED if Soft-RoCE could not be set up; guest_tests.sh prints the
# SAN-SOFTROCE-SUMMARY line the host looks for. Powers off at the end, whatever happened.
export PATH=/bin:/sbin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
arg() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" /proc/cmdline; }
BUILD=$(arg san_build); HERE=$(arg san_here); FILTER=$(arg san_filter); ROLE=$(arg san_role)
fail() { echo "SAN-SOFTROCE-SETUP-FAILED: $*"; poweroff -f; }
for m in crc32_generic virtio_pci 9pnet_virtio 9p veth ib_uverbs rdma_ucm rdma_rxe; do
  modprobe $m || fail "modprobe $m"
done
[ -n "$ROLE" ] && { modprobe virtio_net || fail "modprobe virtio_net"; }
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host ||
  fail "mount the host root over 9p"
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mount -t tmpfs tmp /host/tmp; mount -t tmpfs run /host/run
mount -t tmpfs vartmp /host/var/tmp 2>/dev/null
# The repository and the build dir at their own paths (they may live under a tmpfs just mounted).
SRC=$(arg san_src)
for share in "hostsrc $SRC" "hostbuild $BUILD"; do
  set -- $share
  mkdir -p "/host$2" 2>/dev/null
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose "$1" "/host$2" ||
    fail "mount $1 at $2"
done
echo "=== guest: kernel $(uname -r), host root mounted, uptime $(cut -d' ' -f1 /proc/uptime) s"
exec chroot /host /bin/bash "$HERE/guest_tests.sh" "$BUILD" "$FILTER" "$ROLE"
