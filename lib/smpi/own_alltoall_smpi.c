/* SMPI stub of lib/src/coll/own_alltoall.c: SMPI 3.32 has no MPI_T interface
 * (no MPI_T_cvar_handle, MPI_T_init_thread, ...). Behaves as under an MPI
 * without MPICH's MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM (Open MPI): left alone. */
#include "coll.h"
int wm_own_alltoall_concurrent(int *saved) { *saved = -1; return 0; }
void wm_own_alltoall_restore(int saved) { (void)saved; }
void wm_own_alltoall_finalize(void) {}
