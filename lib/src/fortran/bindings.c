/* Fortran bindings: programs using mpif.h, the mpi module or the mpi_f08
 * module reach the same algorithms as C programs.
 *
 * Open MPI 4.1's Fortran library calls PMPI_Bcast & co directly, so wrapping
 * the C MPI_* symbols does not see Fortran programs (measured). This file
 * defines the Fortran symbols themselves (mpi_bcast_, its other manglings,
 * and Open MPI's mpi_bcast_f08_); the preloaded library comes first in the
 * symbol search order, so the program calls these.
 *
 * Handles are converted with MPI_*_f2c; MPI_IN_PLACE and MPI_BOTTOM are
 * recognised by arguments.h. */
#include <mpi.h>

#include "arguments.h"
#include "names.h"
#include "../coll/wanmpi_internal.h"


void mpi_bcast_(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_bcast(buffer(buf), *count, MPI_Type_f2c(*type), *root, MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_bcast, MPI_BCAST,
              (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr),
              (buf, count, type, root, comm, ierr))

void mpi_allreduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                    MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_allreduce(send_buffer(sendbuf), buffer(recvbuf), *count, MPI_Type_f2c(*type),
                           MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_allreduce, MPI_ALLREDUCE,
              (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, recvbuf, count, type, op, comm, ierr))

void mpi_reduce_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                 MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_reduce(send_buffer(sendbuf), buffer(recvbuf), *count, MPI_Type_f2c(*type),
                        MPI_Op_f2c(*op), *root, MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_reduce, MPI_REDUCE,
              (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, recvbuf, count, type, op, root, comm, ierr))

void mpi_reduce_scatter_block_(const void *sendbuf, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *type,
                               MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_reduce_scatter_block(send_buffer(sendbuf), buffer(recvbuf), *recvcount,
                                      MPI_Type_f2c(*type), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
              (const void *sendbuf, void *recvbuf, MPI_Fint *recvcount, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, recvbuf, recvcount, type, op, comm, ierr))

void mpi_reduce_scatter_(const void *sendbuf, void *recvbuf, const MPI_Fint *recvcounts, MPI_Fint *type,
                         MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_reduce_scatter(send_buffer(sendbuf), buffer(recvbuf), recvcounts, MPI_Type_f2c(*type),
                                MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_reduce_scatter, MPI_REDUCE_SCATTER,
              (const void *sendbuf, void *recvbuf, const MPI_Fint *recvcounts, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, recvbuf, recvcounts, type, op, comm, ierr))

void mpi_scan_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm,
               MPI_Fint *ierr)
{
    set(ierr, wm_scan(send_buffer(sendbuf), buffer(recvbuf), *count, MPI_Type_f2c(*type), MPI_Op_f2c(*op),
                      MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_scan, MPI_SCAN,
              (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, recvbuf, count, type, op, comm, ierr))

void mpi_exscan_(const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                 MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_exscan(send_buffer(sendbuf), buffer(recvbuf), *count, MPI_Type_f2c(*type), MPI_Op_f2c(*op),
                        MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_exscan, MPI_EXSCAN,
              (const void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
               MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, recvbuf, count, type, op, comm, ierr))

void mpi_allgatherv_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                     const MPI_Fint *recvcounts, const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm,
                     MPI_Fint *ierr)
{
    /* MPI_Fint is int with both MPIs' default Fortran integers (checked at build time below) */
    set(ierr, wm_allgatherv(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf),
                            (const int *)recvcounts, (const int *)displs, MPI_Type_f2c(*recvtype),
                            MPI_Comm_f2c(*comm)));
}
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint arrays are passed as int arrays");
FORTRAN_NAMES(mpi_allgatherv, MPI_ALLGATHERV,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
               const MPI_Fint *recvcounts, const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *comm,
               MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, ierr))

void mpi_allgather_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                    MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_allgather(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf),
                           *recvcount, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_allgather, MPI_ALLGATHER,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
               MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr))

void mpi_gather_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
                 MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_gather(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf), *recvcount,
                        MPI_Type_f2c(*recvtype), *root, MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_gather, MPI_GATHER,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
               MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr))

void mpi_gatherv_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                  const MPI_Fint *recvcounts, const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *root,
                  MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_gatherv(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf),
                         (const int *)recvcounts, (const int *)displs, MPI_Type_f2c(*recvtype), *root,
                         MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_gatherv, MPI_GATHERV,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
               const MPI_Fint *recvcounts, const MPI_Fint *displs, MPI_Fint *recvtype, MPI_Fint *root,
               MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, ierr))

/* scatter: MPI_IN_PLACE is the root's receive buffer */
void mpi_scatter_(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
                  MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_scatter(buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), (void *)send_buffer(recvbuf),
                         *recvcount, MPI_Type_f2c(*recvtype), *root, MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_scatter, MPI_SCATTER,
              (void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf, MPI_Fint *recvcount,
               MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr))

void mpi_scatterv_(void *sendbuf, const MPI_Fint *sendcounts, const MPI_Fint *displs, MPI_Fint *sendtype,
                   void *recvbuf, MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
                   MPI_Fint *ierr)
{
    set(ierr, wm_scatterv(buffer(sendbuf), (const int *)sendcounts, (const int *)displs, MPI_Type_f2c(*sendtype),
                          (void *)send_buffer(recvbuf), *recvcount, MPI_Type_f2c(*recvtype), *root,
                          MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_scatterv, MPI_SCATTERV,
              (void *sendbuf, const MPI_Fint *sendcounts, const MPI_Fint *displs, MPI_Fint *sendtype,
               void *recvbuf, MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *root, MPI_Fint *comm,
               MPI_Fint *ierr),
              (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr))

void mpi_barrier_(MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_barrier_call(MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_barrier, MPI_BARRIER, (MPI_Fint *comm, MPI_Fint *ierr), (comm, ierr))

void mpi_finalize_(MPI_Fint *ierr)
{
    set(ierr, wm_finalize());
}
FORTRAN_NAMES(mpi_finalize, MPI_FINALIZE, (MPI_Fint *ierr), (ierr))

void mpi_alltoall_(const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
                   MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    set(ierr, wm_alltoall(send_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), buffer(recvbuf),
                          *recvcount, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_alltoall, MPI_ALLTOALL,
              (const void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype, void *recvbuf,
               MPI_Fint *recvcount, MPI_Fint *recvtype, MPI_Fint *comm, MPI_Fint *ierr),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr))

/* MPI_Fint is int with both MPIs here; the count arrays pass through. */
void mpi_alltoallv_(const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtype,
                    void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,
                    MPI_Fint *ierr)
{
    set(ierr, wm_alltoallv(send_buffer(sendbuf), sendcounts, sdispls, MPI_Type_f2c(*sendtype), buffer(recvbuf),
                           recvcounts, rdispls, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm)));
}
FORTRAN_NAMES(mpi_alltoallv, MPI_ALLTOALLV,
              (const void *sendbuf, MPI_Fint *sendcounts, MPI_Fint *sdispls, MPI_Fint *sendtype,
               void *recvbuf, MPI_Fint *recvcounts, MPI_Fint *rdispls, MPI_Fint *recvtype, MPI_Fint *comm,
               MPI_Fint *ierr),
              (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, ierr))
