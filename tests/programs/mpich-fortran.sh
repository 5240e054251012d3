#!/bin/bash
# mpich-fortran.sh DEST VENV: Fortran bindings for the MPICH 5 of the project
# venv (PyPI's mpich wheel ships libmpi.so.12 without Fortran bindings).
#
# Takes Debian 12's MPICH 4.0.2 Fortran bindings (libmpichfort.so.12 from
# libmpich12, mpif.h and the mpi modules from libmpich-dev) without
# installing the packages (apt-get download + dpkg-deb -x, so the
# update-alternatives links for mpicc/mpirun/mpif90 stay with Open MPI), and
# binds them to the venv's libmpi.so.12 (same MPICH ABI, same handle values):
#   DEST/lib/libmpichfort.so.12       Debian's library, its DT_NEEDED
#                                     libmpich.so.12 renamed libmpi.so.12
#   DEST/lib/libmpichfort-compat.so   the three PMPIX_Delete_error_* functions
#                                     the 4.0.2 bindings reference and
#                                     MPICH 5 dropped (they return an error)
#   DEST/include/                     mpif.h and the .mod files (gfortran 12)
#   DEST/bin/mpif90                   compiler wrapper (gfortran)
# See docs/testing.md ("Fortran with MPICH") for what was measured.
set -euo pipefail
dest=$(realpath -m "${1:?usage: mpich-fortran.sh DEST VENV}")
venv=$(realpath "${2:?usage: mpich-fortran.sh DEST VENV}")
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
test -e "$venv/lib/libmpi.so.12" || { echo "mpich-fortran: no $venv/lib/libmpi.so.12" >&2; exit 1; }
command -v gfortran >/dev/null || { echo "mpich-fortran: gfortran is missing" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
# apt-get download as root fetches as user _apt when it can write here
chown _apt "$tmp" 2>/dev/null || true
cd "$tmp"
if ! apt-get download -qq libmpich12 libmpich-dev >/dev/null 2>&1; then
    apt-get update -qq
    apt-get download -qq libmpich12 libmpich-dev >/dev/null
fi
for deb in ./*.deb; do dpkg-deb -x "$deb" x; done

rm -rf "$dest.new"
mkdir -p "$dest.new/lib" "$dest.new/include" "$dest.new/bin"
src=x/usr/lib/$arch
real=$(readlink -f "$src/libmpichfort.so.12")
python3 - "$real" "$dest.new/lib/libmpichfort.so.12" <<'EOF'
import sys
data = open(sys.argv[1], 'rb').read()
old, new = b'\0libmpich.so.12\0', b'\0libmpi.so.12\0\0\0'   # same length
if data.count(old) != 1:
    sys.exit(f'mpich-fortran: expected one libmpich.so.12 in {sys.argv[1]}, found {data.count(old)}')
open(sys.argv[2], 'wb').write(data.replace(old, new))
EOF
ln -s libmpichfort.so.12 "$dest.new/lib/libmpichfort.so"
cat > compat.c <<'EOF'
/* referenced by MPICH 4.0.2's Fortran bindings, gone from MPICH 5 */
int PMPIX_Delete_error_class(int c) { (void)c; return 15; /* MPI_ERR_OTHER */ }
int PMPIX_Delete_error_code(int c) { (void)c; return 15; }
int PMPIX_Delete_error_string(int c) { (void)c; return 15; }
EOF
gcc -O2 -Wall -shared -fPIC -Wl,-soname,libmpichfort-compat.so -o "$dest.new/lib/libmpichfort-compat.so" compat.c
cp x/usr/include/$arch/mpich/mpif.h x/usr/include/$arch/mpich/*.mod "$dest.new/include/"
version=$(dpkg-deb -f libmpich12_*.deb Version)
cat > "$dest.new/bin/mpif90" <<EOF
#!/bin/sh
# gfortran for the MPICH 5 in $venv, with the Fortran bindings of Debian's
# MPICH $version (made by tests/programs/mpich-fortran.sh).
# -fallow-argument-mismatch: MPICH's mpi module has no interfaces for choice
# buffers, so gfortran >= 10 rejects calls with different buffer types.
exec gfortran -fallow-argument-mismatch -I$dest/include "\$@" \\
    -L$dest/lib -Wl,-rpath,$dest/lib -Wl,--no-as-needed -lmpichfort -lmpichfort-compat \\
    -L$venv/lib -Wl,-rpath,$venv/lib -lmpi -Wl,--as-needed
EOF
chmod 755 "$dest.new/bin/mpif90"
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "mpich-fortran: $dest/bin/mpif90 (Fortran bindings of Debian's MPICH $version on $venv/lib/libmpi.so.12)"
