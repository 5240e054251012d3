/* What this build of libwanmpi was compiled against, from the MPI headers
 * (wanmpi.h: wanmpi_built_for). `wanmpi run` reads it from the library file
 * (ELF section .wanmpi_built_for, without loading the library) and compares it
 * with the MPI of the launcher it starts, so a libwanmpi built for one MPI is
 * never preloaded under another (docs/install.md, "Which MPI"). A build
 * against MPI-5's standard ABI (mpicc_abi) serves every MPI that implements
 * it ("MPI ABI 1.0"; docs/install.md, "The MPI standard ABI"). */
#include <mpi.h>
#include "../../include/wanmpi.h"

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
