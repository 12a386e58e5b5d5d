#!/bin/sh
# Unpacks pure-ftpd (and pure-pw) under a prefix, for the FtpClientAgainstPureFtpd interop test,
# without installing the package: Debian's pure-ftpd conflicts with vsftpd (both provide
# ftp-server), and installing it removes vsftpd, whose postrm deletes the 'ftp' user the vsftpd
# tests and ftp-bench need. The test looks in $PURE_FTPD_PREFIX, then /opt/pure-ftpd.
# Usage: fetch-pure-ftpd.sh [prefix]   (default /opt/pure-ftpd; needs apt's package lists)
set -eu
PREFIX=${1:-/opt/pure-ftpd}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
apt-get download pure-ftpd pure-ftpd-common
mkdir -p "$PREFIX"
for deb in ./*.deb; do dpkg-deb -x "$deb" "$PREFIX"; done
"$PREFIX/usr/sbin/pure-ftpd" --help > /dev/null 2>&1 || true
ls -l "$PREFIX/usr/sbin/pure-ftpd" "$PREFIX/usr/bin/pure-pw"
