#!/bin/sh
# Fixture: installs the build tree twice (common.sh says where and why), from scratch.
. "$(dirname "$0")/common.sh"
rm -rf "$WORK"
mkdir -p "$WORK"
DESTDIR="$WORK/destdir" cmake --install "$SAN_INSTALL_BUILD" > "$WORK/destdir.log"
cmake --install "$SAN_INSTALL_BUILD" --prefix "$PREFIX" > "$WORK/prefix.log"
echo "installed $(find "$WORK/destdir" -type f | wc -l) files under DESTDIR and --prefix"
