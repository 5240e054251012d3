#%Module1.0
## wanmpi @VERSION@ (installed by `make install`, docs/install.md), for
## environment-modules and Lmod. It finds its prefix from its own path,
## PREFIX/share/modulefiles/wanmpi/@VERSION@ (following a symbolic link to
## it from a site's modules tree), so the installation keeps working when it
## is moved or copied.

proc ModulesHelp { } {
    puts stderr "wanmpi @VERSION@: run unmodified MPI programs fast across clusters joined by a"
    puts stderr "wide-area network. Puts wanmpi on PATH and sets WANMPI_PREFIX; see"
    puts stderr "\$WANMPI_PREFIX/share/doc/wanmpi and `wanmpi --version`."
}

module-whatis "wanmpi @VERSION@: MPI programs across clusters joined by a wide-area network"
conflict wanmpi

set self [file normalize $ModulesCurrentModulefile]
while {[file type $self] eq "link"} {
    set self [file normalize [file join [file dirname $self] [file readlink $self]]]
}
set prefix [file dirname [file dirname [file dirname [file dirname $self]]]]
prepend-path PATH $prefix/bin
setenv WANMPI_PREFIX $prefix
