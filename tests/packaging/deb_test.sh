#!/bin/sh
# The Debian packages (deploy/debian/CMakeLists.txt), built by CPack from this build tree:
#   - every file an install at the packages' prefix (/usr, with DESTDIR) puts anywhere is in
#     exactly one package, and no package holds a file that install does not put there;
#   - each package has its copyright file; the libraries have shlibs and ldconfig triggers;
#   - sanlib-drpc's postinst creates the drpc user; no maintainer script enables or starts a
#     service (systemctl, deb-systemd-*, invoke-rc.d, update-rc.d);
#   - lintian, when installed, reports no error (warnings are explained in docs/install.md).
# Arguments: the build tree, a scratch directory.
set -eu
BUILD=$1
WORK=$2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
rm -rf "$WORK" "$BUILD/packages"
mkdir -p "$WORK/all" "$WORK/control"
(cd "$BUILD" && cpack -G DEB > "$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log"; fail "cpack"; }
DESTDIR="$WORK/all" cmake --install "$BUILD" --prefix /usr > /dev/null

# Files (not directories) as ./path, for the install and for each package.
(cd "$WORK/all" && find . ! -type d | sort) > "$WORK/installed.txt"
: > "$WORK/packaged.txt"
for deb in "$BUILD"/packages/*.deb; do
  name=$(dpkg-deb -f "$deb" Package)
  dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }' | sed "s|\$| $name|" >> "$WORK/packaged.txt"
  dpkg-deb -e "$deb" "$WORK/control/$name"
  grep -q "^./usr/share/doc/$name/copyright $name\$" "$WORK/packaged.txt" ||
    fail "$name has no /usr/share/doc/$name/copyright"
done
echo "$(ls "$BUILD"/packages/*.deb | wc -l) packages, $(wc -l < "$WORK/installed.txt") installed files"
twice=$(awk '{ print $1 }' "$WORK/packaged.txt" | sort | uniq -d)
[ -z "$twice" ] || fail "in more than one package: $twice"
awk '{ print $1 }' "$WORK/packaged.txt" | sort > "$WORK/packaged_files.txt"
missing=$(comm -23 "$WORK/installed.txt" "$WORK/packaged_files.txt")
[ -z "$missing" ] || fail "installed but in no package: $missing"
extra=$(comm -13 "$WORK/installed.txt" "$WORK/packaged_files.txt")
[ -z "$extra" ] || fail "packaged but not installed: $extra"

for library in libsan0 librpcvia0; do
  [ -d "$WORK/control/$library" ] || continue
  grep -q "^${library%0} 0 $library " "$WORK/control/$library/shlibs" || fail "$library: shlibs"
  grep -q "activate-noawait ldconfig" "$WORK/control/$library/triggers" || fail "$library: triggers"
done
if [ -d "$WORK/control/sanlib-drpc" ]; then
  grep -q "adduser --system .* drpc" "$WORK/control/sanlib-drpc/postinst" ||
    fail "sanlib-drpc's postinst does not create the drpc user"
fi
starts=""
for script in "$WORK"/control/*/post* "$WORK"/control/*/pre*; do
  [ -e "$script" ] || continue
  if sed 's/#.*//' "$script" | grep -qE 'systemctl|deb-systemd-|invoke-rc\.d|update-rc\.d'; then
    starts="$starts $script"
  fi
done
[ -z "$starts" ] || fail "maintainer scripts enable or start services: $starts"

if command -v lintian > /dev/null; then
  lintian --no-tag-display-limit "$BUILD"/packages/*.deb > "$WORK/lintian.txt" 2>&1 || true
  errors=$(grep '^E:' "$WORK/lintian.txt" || true)
  [ -z "$errors" ] || fail "lintian errors: $errors"
  echo "lintian: no errors, $(grep -c '^W:' "$WORK/lintian.txt" || true) warnings ($WORK/lintian.txt)"
else
  echo "lintian not installed: not run"
fi
