#!/bin/sh
# Installs the Debian 12 packages sanlib needs to build, test and benchmark (uses sudo unless
# already root). One list, used by the README's commands and by .ci/run. The second half are the
# real peers the integration tests start: rpcbind and the system rpcgen (rpcgen_via), vsftpd/lftp/
# curl/inetd (ftpd), and the programs of the compat transparency suite.
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PACKAGES="
  build-essential cmake pkg-config
  libgtest-dev libgmock-dev
  libboost-program-options-dev
  socat
  gnuplot-nox
  libtirpc-dev rpcsvc-proto rpcbind
  libcrypt-dev libedit-dev lftp tnftp vsftpd curl openbsd-inetd
  netpipe-tcp sockperf iperf3 redis-server redis-tools memcached libmemcached-tools nginx-light wrk
  python3
"
$SUDO apt-get update
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $PACKAGES
