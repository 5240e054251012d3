/* The collective entry points shared by the C and Fortran bindings. */
#ifndef WANMPI_INTERNAL_H
#define WANMPI_INTERNAL_H

#include <mpi.h>

#include "../common/settings.h"    /* enum wm_coll */

int wm_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int wm_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int wm_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
              MPI_Comm comm);
int wm_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm);
int wm_reduce_scatter(const void *sendbuf, void *recvbuf, const int *recvcounts, MPI_Datatype type, MPI_Op op,
                      MPI_Comm comm);
int wm_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm);
int wm_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts,
                  const int *displs, MPI_Datatype recvtype, MPI_Comm comm);
int wm_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
              MPI_Datatype recvtype, int root, MPI_Comm comm);
int wm_gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts,
               const int *displs, MPI_Datatype recvtype, int root, MPI_Comm comm);
int wm_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm);
int wm_scatterv(const void *sendbuf, const int *sendcounts, const int *displs, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int wm_scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int wm_exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int wm_barrier_call(MPI_Comm comm);
int wm_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm);
int wm_alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype,
                 void *recvbuf, const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm);
int wm_finalize(void);

/* Nonblocking (nb.h): ours where the blocking call would run a schedule. */
int wm_ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *request);
int wm_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                  MPI_Request *request);
int wm_ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm, MPI_Request *request);
int wm_ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm, MPI_Request *request);
int wm_ireduce_scatter(const void *sendbuf, void *recvbuf, const int *recvcounts, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, MPI_Request *request);
int wm_iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int wm_iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int *recvcounts, const int *displs, MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request);
int wm_ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int wm_ibarrier(MPI_Comm comm, MPI_Request *request);
int wm_ialltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype,
                  void *recvbuf, const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm,
                  MPI_Request *request);

/* api_alltoallw.c */
/* The same, counted in the statistics as `recorded`, `call` naming it in
 * the argument check's messages (api_large.c's MPI_Alltoallv_c). */
int wm_alltoallw_as(enum wm_coll recorded, const char *call, const void *sendbuf, const int *sendcounts,
                    const int *sdispls, const MPI_Datatype *sendtypes, void *recvbuf, const int *recvcounts,
                    const int *rdispls, const MPI_Datatype *recvtypes, MPI_Comm comm);
int wm_alltoallw(const void *sendbuf, const int *sendcounts, const int *sdispls, const MPI_Datatype *sendtypes,
                 void *recvbuf, const int *recvcounts, const int *rdispls, const MPI_Datatype *recvtypes,
                 MPI_Comm comm);
int wm_ialltoallw(const void *sendbuf, const int *sendcounts, const int *sdispls, const MPI_Datatype *sendtypes,
                  void *recvbuf, const int *recvcounts, const int *rdispls, const MPI_Datatype *recvtypes,
                  MPI_Comm comm, MPI_Request *request);

#endif
