#!/bin/sh
# ftp-bench: SOVIA Table I on today's stack (issue 5), now the FTP section of bench/report:
# ftp_client <-> ftpd with the data over SAN, the same pair on kernel TCP (SAN_PROVIDER=off), and
# vsftpd with the same ftp_client, get and put of 19 MB and 145 MB files on tmpfs, interleaved.
# The figure is the client's wall time from exec to exit (login, transfer, the 226 reply and QUIT
# included), timed with microseconds; cp is timed the same way; every copy is compared and the
# SAN rows are checked to have run on shm (ftp_client -v and SAN_REPORT). CPU per GB of client and
# server beside each row. Needs root for vsftpd's anonymous upload directory (docs/ftp.md).
# Usage: ftp-bench.sh [build dir] [runs] [output dir]   (default build/release, 5 runs, a temp dir)
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=${3:-$(mktemp -d)}
exec "$HERE/report" --only ftp --build "${1:-build/release}" --runs "${2:-5}" --out "$OUT"
