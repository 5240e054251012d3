/* libwanfence: the finalize fence alone, preloaded by `wanmpi run` into MPICH
 * jobs that run without libwanmpi (--no-wanmpi, `bench` baselines), because
 * wanmpi's MPICH launch settings need it there too (fence.c). It defines
 * MPI_Finalize and the Fortran mpi_finalize (whose MPI bindings may call
 * PMPI_Finalize directly) and nothing else. */
#include <mpi.h>

#include "fence.h"
#include "../fortran/names.h"

int MPI_Finalize(void)
{
    wm_finalize_fence();
    return PMPI_Finalize();
}

#ifndef MPI_ABI_VERSION                 /* the standard ABI is C only: no MPI_Fint */
void mpi_finalize_(MPI_Fint *ierr)
{
    wm_finalize_fence();
    int rc = PMPI_Finalize();
    if (ierr)                           /* optional in mpi_f08 */
        *ierr = (MPI_Fint)rc;
}
FORTRAN_NAMES(mpi_finalize, MPI_FINALIZE, (MPI_Fint *ierr), (ierr))
#endif
