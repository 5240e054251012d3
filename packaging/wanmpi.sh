#!/bin/sh
# wanmpi @VERSION@, installed by `make install` (docs/install.md). Finds its
# prefix from its own path (following symbolic links to it), so the
# installation keeps working when it is moved or copied, and runs the wanmpi
# package of the prefix's venv. -I: neither the current directory nor
# PYTHON* variables can put another wanmpi (a source checkout) in its place.
self=$0
case $self in
    */*) ;;
    *) self=$(command -v -- "$self") || { echo "wanmpi: cannot find myself ($0)" >&2; exit 127; } ;;
esac
while [ -L "$self" ]; do
    link=$(readlink -- "$self")
    case $link in
        /*) self=$link ;;
        *) self=$(dirname -- "$self")/$link ;;
    esac
done
prefix=$(CDPATH= cd -P -- "$(dirname -- "$self")/.." && pwd -P) || exit 127
exec "$prefix/lib/wanmpi/venv/bin/python" -I -m wanmpi "$@"
