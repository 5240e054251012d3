/* Which MPI. What this build of libwanmpi was compiled against, from the
 * MPI headers (wanmpi.h: wanmpi_built_for): `wanmpi run` reads it from the
 * library file (ELF section .wanmpi_built_for, without loading the library)
 * and compares it with the MPI of the launcher it starts, so a libwanmpi
 * built for one MPI is never preloaded under another (docs/install.md,
 * "Which MPI"). A build against MPI-5's standard ABI (mpicc_abi) serves
 * every MPI that implements it ("MPI ABI 1.0"; docs/install.md, "The MPI
 * standard ABI"). And the MPI it runs under (which_mpi.h). */
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/wanmpi.h"
#include "which_mpi.h"

#define WM_STR_(x) #x
#define WM_STR(x) WM_STR_(x)

#if defined(MPI_ABI_VERSION)            /* mpi_abi.h: MPI-5's standard ABI, any MPI that has it */
#define WM_BUILT_FOR "MPI ABI " WM_STR(MPI_ABI_VERSION) "." WM_STR(MPI_ABI_SUBVERSION)
#elif defined(OMPI_MAJOR_VERSION)
#define WM_BUILT_FOR "Open MPI " WM_STR(OMPI_MAJOR_VERSION) "." WM_STR(OMPI_MINOR_VERSION) "." \
    WM_STR(OMPI_RELEASE_VERSION)
#elif defined(I_MPI_VERSION)
#define WM_BUILT_FOR "Intel MPI " I_MPI_VERSION
#elif defined(MVAPICH2_VERSION)
#define WM_BUILT_FOR "MVAPICH2 " MVAPICH2_VERSION
#elif defined(MVAPICH_VERSION)
#define WM_BUILT_FOR "MVAPICH " MVAPICH_VERSION
#elif defined(MPICH_VERSION)
#define WM_BUILT_FOR "MPICH " MPICH_VERSION
#else
#define WM_BUILT_FOR "MPI " WM_STR(MPI_VERSION) "." WM_STR(MPI_SUBVERSION)
#endif

__attribute__((section(".wanmpi_built_for"), used))
const char wanmpi_built_for[] = WM_BUILT_FOR;

#if defined(MPI_ABI_VERSION)
static enum wm_mpi running = WM_MPI_OTHER;
static pthread_once_t identified = PTHREAD_ONCE_INIT;

/* "MPICH Version: ...", "Intel(R) MPI Library ...", "Open MPI v5.0.11";
 * MVAPICH says its own name first: other, as in its own build. */
static void identify(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (PMPI_Get_library_version(version, &len) != MPI_SUCCESS)
        return;
    if (strncmp(version, "MPICH", 5) == 0)
        running = WM_MPI_MPICH;
    else if (strncmp(version, "Intel(R) MPI", 12) == 0)
        running = WM_MPI_INTELMPI;
    else if (strncmp(version, "Open MPI v", 10) == 0)
        running = atoi(version + 10) >= 5 ? WM_MPI_OPENMPI5 : WM_MPI_OPENMPI;
}

enum wm_mpi wm_running_mpi(void)
{
    pthread_once(&identified, identify);
    return running;
}
#else
enum wm_mpi wm_running_mpi(void)
{
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5
    return WM_MPI_OPENMPI5;
#elif defined(OMPI_MAJOR_VERSION)
    return WM_MPI_OPENMPI;
#elif defined(I_MPI_VERSION)
    return WM_MPI_INTELMPI;
#elif defined(MPICH_VERSION) && !defined(MVAPICH_VERSION) && !defined(MVAPICH2_VERSION)
    return WM_MPI_MPICH;
#else
    return WM_MPI_OTHER;
#endif
}
#endif

int wm_mpi_persistent_broken(void)
{
    return wm_running_mpi() == WM_MPI_INTELMPI;
}
