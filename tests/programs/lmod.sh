#!/bin/bash
# lmod.sh DEST: Debian 12's Lmod, unpacked into DEST without installing it,
# so that tests/test_install.py loads the prefix's modulefile with Lmod as
# well as with environment-modules.
#
# Debian's lmod and environment-modules packages conflict (each names the
# other in Conflicts:): installing lmod removes environment-modules. Most
# HPC sites run Lmod, the others environment-modules, and the modulefile
# must work with both, so environment-modules stays installed from
# APT_PACKAGES and Lmod is taken from its package here (apt-get download +
# dpkg-deb -x, as tests/programs/mpich-fortran.sh does), with its
# dependencies (lua5.3, lua-posix, lua-filesystem, lua-json, lua-term, tcl)
# from APT_PACKAGES, which conflict with nothing. Nothing outside DEST
# changes: no /etc/profile.d script, no `module` for other shells.
#   DEST/lmod/init/bash    what a shell sources to get Lmod's `module`
#                          (Debian's /usr/share/lmod/lmod/init/bash)
#   DEST/lmod/libexec/     Lmod itself (Lua; finds its files from its own path)
#   DEST/lmod/lib/         tcl2lua.so: Tcl modulefiles run in an embedded Tcl
# The init scripts and tcl2lua.tcl name /usr/share/lmod; they are rewritten
# to DEST, the only change to the package's files.
set -euo pipefail
dest=$(realpath -m "${1:?usage: lmod.sh DEST}")
for dep in lua5.3 tclsh; do
    command -v "$dep" >/dev/null || { echo "lmod: $dep is missing (make apt)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
# apt-get download as root fetches as user _apt when it can write here
chown _apt "$tmp" 2>/dev/null || true
cd "$tmp"
if ! apt-get download -qq lmod >/dev/null 2>&1; then
    apt-get update -qq
    apt-get download -qq lmod >/dev/null
fi
dpkg-deb -x ./lmod_*.deb x
version=$(readlink x/usr/share/lmod/lmod)                     # 8.6.19
test -d "x/usr/share/lmod/$version/libexec" || { echo "lmod: unexpected package layout" >&2; exit 1; }

rm -rf "$dest.new"
mkdir -p "$dest.new"
cp -a "x/usr/share/lmod/$version" "$dest.new/$version"
rm "$dest.new/$version/lib"                                    # -> ../../../lib/lmod/VERSION/lib
cp -a "x/usr/lib/lmod/$version/lib" "$dest.new/$version/lib"
ln -s "$version" "$dest.new/lmod"
grep -rlI /usr/share/lmod "$dest.new/$version/init" "$dest.new/$version/libexec/tcl2lua.tcl" \
    | xargs sed -i "s#/usr/share/lmod#$dest#g"
# the paths above name DEST, so the tree is moved into place as it is
rm -rf "$dest"
mv "$dest.new" "$dest"
grep -q "LMOD_PKG=$dest/lmod\$" "$dest/lmod/init/bash" || { echo "lmod: init/bash not rewritten" >&2; exit 1; }
echo "lmod: Lmod $version in $dest (source $dest/lmod/init/bash)"
