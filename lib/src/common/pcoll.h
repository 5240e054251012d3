/* Which persistent collectives the MPI has (from <mpi.h>), one home for the
 * test:
 * - WM_PCOLL_MPIX: Open MPI 4.1's MPIX_<coll>_init (its pcollreq extension,
 *   declared in <mpi-ext.h>);
 * - WM_PCOLL: it has them, as those or as MPI-4's MPI_<coll>_init (MPICH 5;
 *   Open MPI 5, whose MPI_VERSION is still 3). Neither: SimGrid SMPI 3.32
 *   (MPI 3.1). */
#ifndef WM_PCOLL_H
#define WM_PCOLL_H

#include <mpi.h>

#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5
#define WM_PCOLL_MPIX 1
#endif
#if defined(WM_PCOLL_MPIX) || MPI_VERSION >= 4 || (defined(OPEN_MPI) && OMPI_MAJOR_VERSION >= 5)
#define WM_PCOLL 1
#endif

#endif
