#!/bin/sh
# lib/smpi/build-simgrid.sh OUT PIP: SimGrid 3.32, the release Debian's
# libsimgrid-dev installs, from its source on PyPI, with the patches of
# PATCHES below, in order: OUT/libsimgrid.so.3.32 and, beside it, the list of
# patches it has (`make simgrid`; `wanmpi sim` runs on it once it is there and
# names them in its results, docs/scale.md). Only the library:
# smpicc, smpirun and smpimain stay Debian's, which load it by its soname.
# About 6 minutes on 2 cores, 650 MB of memory; OUT/src and OUT/cmake may be
# removed afterwards.
set -eu
out=$1
pip=$2
here=$(cd "$(dirname "$0")" && pwd)
version=3.32
archive=simgrid-$version.tar.gz
sha256=3cc752a28deb2ae42cd51cc835a572f13201702dc94545ced0e77c657231cd76
PATCHES="simgrid-activities.patch simgrid-comm-setup.patch"

mkdir -p "$out/src"
if [ ! -f "$out/src/$archive" ]; then
    "$pip" download --quiet --no-deps --no-binary :all: "simgrid==$version" -d "$out/src" \
        || { echo "build-simgrid: could not download simgrid==$version's source from PyPI" >&2; exit 1; }
fi
echo "$sha256  $out/src/$archive" | sha256sum -c --quiet - \
    || { echo "build-simgrid: $out/src/$archive is not SimGrid $version's source (sha256 differs)" >&2; exit 1; }
rm -rf "$out/src/simgrid-$version"
tar xzf "$out/src/$archive" -C "$out/src"
for p in $PATCHES; do
    patch -s -p1 -d "$out/src/simgrid-$version" < "$here/$p" \
        || { echo "build-simgrid: $p does not apply to SimGrid $version" >&2; exit 1; }
done
# SMPI only: no model checking, Java, Python, ns-3, Fortran bindings or documentation;
# run from the build directory (SimGrid's CMakeLists leaves a probe program in
# the directory cmake runs in)
out=$(cd "$out" && pwd)
mkdir -p "$out/cmake"
cd "$out/cmake"
nice cmake -S "$out/src/simgrid-$version" -B "$out/cmake" -DCMAKE_BUILD_TYPE=Release -Denable_smpi=ON \
    -Denable_model-checking=OFF -Denable_documentation=OFF -Denable_java=OFF -Denable_python=OFF \
    -Denable_ns3=OFF -Denable_fortran=OFF -Denable_lto=OFF -Denable_compile_warnings=OFF >"$out/cmake.log" 2>&1 \
    || { tail -20 "$out/cmake.log" >&2; echo "build-simgrid: cmake failed ($out/cmake.log)" >&2; exit 1; }
nice cmake --build "$out/cmake" --target simgrid -j "$(nproc)" >"$out/build.log" 2>&1 \
    || { tail -20 "$out/build.log" >&2; echo "build-simgrid: the build failed ($out/build.log)" >&2; exit 1; }
cp "$out/cmake/lib/libsimgrid.so.$version" "$out/libsimgrid.so.$version.new"
echo "$PATCHES" > "$out/libsimgrid.so.$version.patches.new"
mv "$out/libsimgrid.so.$version.new" "$out/libsimgrid.so.$version"
mv "$out/libsimgrid.so.$version.patches.new" "$out/libsimgrid.so.$version.patches"
echo "build-simgrid: $out/libsimgrid.so.$version"
