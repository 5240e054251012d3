/* SMPI stubs, compiled with smpicc beside libwanmpi's objects (make smpi).
 *
 * lib/src/coll/own_alltoall.c replaced: SMPI 3.32 has no MPI_T interface
 * (no MPI_T_cvar_handle, MPI_T_init_thread, ...). Behaves as under an MPI
 * without MPICH's MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM (Open MPI): left alone.
 *
 * PMPI_Comm_idup added: SMPI 3.32's aborts the job ("Not yet implemented:
 * PMPI_Comm_idup"), and libwanmpi's MPI_Init (startup.c) posts
 * MPI_COMM_WORLD's duplicate with it beside the identities' allgather. Here
 * it is the blocking duplicate and a null request: the two no longer overlap,
 * which costs simulated start-up time only. The program's own definition is
 * the one its calls bind to, as for the wrappers (docs/scale.md, "How
 * interposition works under SMPI"). */
#include "coll.h"
int wm_own_alltoall_concurrent(int *saved) { *saved = -1; return 0; }
void wm_own_alltoall_restore(int saved) { (void)saved; }
void wm_own_alltoall_finalize(void) {}

int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
    *request = MPI_REQUEST_NULL;
    return PMPI_Comm_dup(comm, newcomm);
}
