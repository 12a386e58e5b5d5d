#!/bin/sh
# Installs the Debian 12 packages sanlib needs to build, test and benchmark (uses sudo unless
# already root). One list, used by the README's commands and by .ci/run.
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PACKAGES="
  build-essential cmake pkg-config
  libgtest-dev libgmock-dev
  libboost-program-options-dev
  socat
  gnuplot-nox
"
$SUDO apt-get update
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $PACKAGES
