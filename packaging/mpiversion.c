/* mpiversion: prints MPI_Get_library_version, the MPI library this program
 * runs with. `make install` builds it with each MPI (packaging/install.py)
 * to record that MPI in the manifest, and installs it beside wanmpi's other
 * programs (PREFIX/libexec/wanmpi/<mpi>/mpiversion). MPI allows the call
 * before MPI_Init, so it needs no launcher. */
#include <mpi.h>
#include <stdio.h>

int main(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (MPI_Get_library_version(version, &length) != MPI_SUCCESS)
        return 1;
    printf("%.*s\n", length, version);
    return 0;
}
