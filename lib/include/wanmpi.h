/* wanmpi: WAN-aware collectives under any MPI (libwanmpi-<mpi>.so).
 *
 * Programs need nothing from this header to benefit: `wanmpi run` preloads
 * the library and MPI_Bcast, MPI_Allreduce, MPI_Reduce, MPI_Allgather,
 * MPI_Reduce_scatter_block and MPI_Barrier (C and Fortran) become
 * cluster-aware. The functions below are for programs that want to know. */
#ifndef WANMPI_H
#define WANMPI_H

#include <mpi.h>

#define WANMPI_VERSION "0.1"

#ifdef __cplusplus
extern "C" {
#endif

/* How many clusters the ranks of `comm` span, and which one (0-based, in
 * order of the lowest rank) the calling rank is in. Collective over `comm`
 * the first time it is called for a communicator. */
int wanmpi_comm_clusters(MPI_Comm comm, int *nclusters, int *my_cluster);

#ifdef __cplusplus
}
#endif

#endif
