#!/bin/sh
# Installs the Debian 12 packages sanlib needs to build, test and benchmark (uses sudo unless
# already root). One list, used by the README's commands and by .ci/run. The second line is for
# installing and packaging (CPack's DEB generator with dpkg-shlibdeps, lintian, the man pages'
# rendering test: docs/install.md). The second half are the
# real peers the integration tests start: rpcbind and the system rpcgen (rpcgen_via, rpcvia),
# vsftpd/lftp/curl/inetd (ftpd), the programs of the compat transparency suite (Node.js and
# PostgreSQL among them), gRPC and Python's grpcio (drpc), rdma-core and QEMU with the tools a Soft-RoCE guest
# needs (the verbs provider and its tests in deploy/softroce/), and iproute2 for the
# network-namespace cluster (deploy/cluster/). bench/report (docs/bench.md) drives netpipe-tcp,
# sockperf, iperf3, redis, nginx-light + wrk, vsftpd and draws with gnuplot-nox; linux-perf gives
# it the profile of a row where SAN is below the kernel.
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PACKAGES="
  build-essential cmake pkg-config
  dpkg-dev file man-db groff-base lintian
  libgtest-dev libgmock-dev
  libboost-program-options-dev
  socat
  gnuplot-nox
  libtirpc-dev rpcsvc-proto rpcbind
  libcrypt-dev libedit-dev lftp tnftp vsftpd curl openbsd-inetd
  netpipe-tcp sockperf iperf3 redis-server redis-tools memcached libmemcached-tools nginx-light wrk
  linux-perf strace
  nodejs postgresql
  python3 openssl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler python3-grpcio python3-protobuf
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core ibverbs-utils rdmacm-utils perftest
  qemu-system-x86 busybox-static cpio kmod iproute2
"
$SUDO apt-get update
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $PACKAGES
# pure-ftpd for the ftp_client interop test, unpacked beside vsftpd rather than installed (the two
# packages conflict): deploy/ftpd/fetch-pure-ftpd.sh. Without it that one test skips.
if [ ! -x /opt/pure-ftpd/usr/sbin/pure-ftpd ]; then
  $SUDO "$(dirname "$0")/ftpd/fetch-pure-ftpd.sh" /opt/pure-ftpd > /dev/null ||
    echo "install-deps: pure-ftpd not unpacked; FtpInterop.FtpClientAgainstPureFtpd will skip" >&2
fi
