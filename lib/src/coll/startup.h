/* What libwanmpi sets up once the MPI has started (startup.c): the pacing
 * keyvals, MPI_COMM_WORLD's cluster map, the progress thread. Called by
 * MPI_Init and MPI_Init_thread, and by the Fortran MPI_INIT and
 * MPI_INIT_THREAD (fortran/init.c), which Open MPI's Fortran library and
 * MPICH's mpi_f08 send to PMPI_Init. Idempotent. */
#ifndef WANMPI_STARTUP_H
#define WANMPI_STARTUP_H

void wm_started(void);

#endif
