/* Which MPI libwanmpi runs under (built_for.c): from the headers it was
 * built with, or, in a build against MPI-5's standard ABI, from the
 * library version of the MPI that implements it in this process. The
 * names are those of `wanmpi run --mpi` (openmpi: Open MPI 4.x). */
#ifndef WANMPI_WHICH_MPI_H
#define WANMPI_WHICH_MPI_H

enum wm_mpi { WM_MPI_OTHER, WM_MPI_OPENMPI, WM_MPI_MPICH, WM_MPI_OPENMPI5, WM_MPI_INTELMPI };

enum wm_mpi wm_running_mpi(void);

/* Whether the MPI's own persistent collectives cannot be trusted, so that
 * libwanmpi keeps them itself, each start the MPI's nonblocking call
 * (persistent.c): Intel MPI 2021.18.1, whose persistent allgather is wrong
 * from its second start and whose persistent requests abort in
 * MPI_Request_get_status and MPI_Waitall (docs/intelmpi.md). */
int wm_mpi_persistent_broken(void);

#endif
