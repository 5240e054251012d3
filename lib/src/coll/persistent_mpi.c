/* A persistent collective of the MPI's own, kept by libwanmpi where the
 * MPI's persistent collectives cannot be trusted
 * (which_mpi.h, wm_mpi_persistent_broken): each start is the MPI's nonblocking call on a
 * communicator of the request's own, a duplicate made at its init. The
 * starts of different persistent collectives may come in different orders
 * on different ranks (MPI-4.1, 6.13); nonblocking calls on one communicator
 * may not, so each gets its own. */
#include "persistent.h"
#include "nb.h"

int wm_persist_mpi_start(const struct wm_persist_args *a, MPI_Comm own, MPI_Request *round)
{
    int rc = MPI_ERR_INTERN;
    switch (a->kind) {
    case WM_P_BCAST: rc = PMPI_Ibcast(a->recvbuf, a->recvcount, a->recvtype, a->root, own, round); break;
    case WM_P_ALLREDUCE:
        rc = PMPI_Iallreduce(a->sendbuf, a->recvbuf, a->recvcount, a->recvtype, a->op, own, round);
        break;
    case WM_P_REDUCE:
        rc = PMPI_Ireduce(a->sendbuf, a->recvbuf, a->recvcount, a->recvtype, a->op, a->root, own, round);
        break;
    case WM_P_REDUCE_SCATTER_BLOCK:
        rc = PMPI_Ireduce_scatter_block(a->sendbuf, a->recvbuf, a->recvcount, a->recvtype, a->op, own, round);
        break;
    case WM_P_REDUCE_SCATTER:
        rc = PMPI_Ireduce_scatter(a->sendbuf, a->recvbuf, a->recvcounts, a->recvtype, a->op, own, round);
        break;
    case WM_P_ALLGATHER:
        rc = PMPI_Iallgather(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype, own,
                             round);
        break;
    case WM_P_ALLGATHERV:
        rc = PMPI_Iallgatherv(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcounts, a->rdispls,
                              a->recvtype, own, round);
        break;
    case WM_P_ALLTOALL:
        rc = PMPI_Ialltoall(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype, own,
                            round);
        break;
    case WM_P_ALLTOALLV:
        rc = PMPI_Ialltoallv(a->sendbuf, a->sendcounts, a->sdispls, a->sendtype, a->recvbuf, a->recvcounts,
                             a->rdispls, a->recvtype, own, round);
        break;
    case WM_P_ALLTOALLW:
        rc = PMPI_Ialltoallw(a->sendbuf, a->sendcounts, a->sdispls, a->sendtypes, a->recvbuf, a->recvcounts,
                             a->rdispls, a->recvtypes, own, round);
        break;
    }
    return wm_nb_adopt_call(rc, own, round);        /* an error: the MPI raised it on `own`, whose handler is the
                                                       user's communicator's (MPI_Comm_dup copies it) */
}
